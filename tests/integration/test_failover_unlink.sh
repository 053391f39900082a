#!/bin/sh
# SPDX-License-Identifier: MIT
# The link file removed and recreated under a bidirectional stream (see test_failover_truncate.sh).
FO_CUT=unlink exec sh "$(dirname "$0")/test_failover_truncate.sh"
