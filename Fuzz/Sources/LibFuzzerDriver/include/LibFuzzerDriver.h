#ifndef LIBFUZZER_DRIVER_H
#define LIBFUZZER_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's driver (compiler-rt FuzzerInterface.h), linked in by `-sanitize=fuzzer`: parses
/// libFuzzer's flags from argc/argv and runs `callback` on every input, as its own main() does.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
