// SPDX-License-Identifier: MIT
/* Preloaded with a sanitizer runtime into uninstrumented programs (tests/sanitize/run.sh): keeps
 * the runtime's late initialisation from calling dlerror(), which corrupts glibc's locale lock.
 *
 * Why: a runtime preloaded into a program it was not linked with initialises on the first
 * malloc(), which may come from another library's constructor before the runtime's own. With
 * curl and wget that is libp11-kit's constructor, inside glibc's newlocale(), which holds
 * __libc_setlocale_lock for writing. ASan/TSan initialisation (Symbolizer::LateInitialize)
 * looks up dlsym(RTLD_DEFAULT, "swift_demangle") and clears the failure with dlerror(); dlerror
 * translates the message with dcgettext(), whose read-lock of __libc_setlocale_lock fails with
 * EDEADLK (the thread holds it for writing) unnoticed, and whose unlock then releases
 * newlocale's write lock; newlocale's own unlock later drives the reader count negative, and
 * the program's next setlocale() waits forever (seen with gdb: a watchpoint on
 * __libc_setlocale_lock.__data.__readers, curl --version hangs with only libasan.so or
 * libtsan.so preloaded, no ntbsock involved). With this symbol present the lookup succeeds and
 * nothing is translated. Returning NULL means "not a Swift name": the runtime then demangles
 * as C++, as it would without the symbol. */
#include <stddef.h>
#include <stdint.h>

char *swift_demangle(const char *name, size_t len, char *out, size_t *out_len, uint32_t flags);

char *swift_demangle(const char *name, size_t len, char *out, size_t *out_len, uint32_t flags)
{
	(void)name;
	(void)len;
	(void)out;
	(void)out_len;
	(void)flags;
	return NULL;
}
