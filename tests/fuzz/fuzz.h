/*
 * What every fuzz harness shares. A harness is one LLVMFuzzerTestOneInput() that feeds its
 * bytes to the production decoder it is named for (never a copy of it) and then checks what
 * the decoder promises about its result; FUZZ_CHECK aborts on a broken promise, which
 * libFuzzer reports as a crash and which fails the corpus replay (tests/fuzz/replay.sh).
 *
 * Built with clang -fsanitize=fuzzer under RGPU_FUZZ=ON; otherwise linked with standalone.c,
 * a main() that runs each file it is given once, so that every build (the sanitizer suite
 * under GCC included) replays the checked-in corpora.
 */
#ifndef RGPU_FUZZ_H
#define RGPU_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                        \
			abort();                                                               \
		}                                                                              \
	} while (0)

#endif
