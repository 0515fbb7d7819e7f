// speexdsp for Swift: the acoustic echo canceller and the preprocessor (noise suppression,
// residual echo suppression). speex_preprocess_ctl takes a void pointer, which Swift can call.
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
