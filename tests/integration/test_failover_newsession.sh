#!/bin/sh
# SPDX-License-Identifier: MIT
# The link file removed and opened anew by a new process of host B under a bidirectional
# stream: a new session beside the old one (see test_failover_truncate.sh).
FO_CUT=newsession exec sh "$(dirname "$0")/test_failover_truncate.sh"
