// Header-only module: LLVMFuzzerRunDriver is defined by libFuzzer's runtime (libclang_rt.fuzzer).
#include "LibFuzzerDriver.h"
