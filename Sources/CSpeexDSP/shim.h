// speexdsp for Swift: the acoustic echo canceller and the preprocessor (noise suppression,
// residual echo suppression). speex_preprocess_ctl takes a void pointer, which Swift can call.
#if !__has_include(<speex/speex_echo.h>)
#error "speexdsp's headers are missing: install Debian's libspeexdsp-dev (sudo apt-get install libopus-dev libspeexdsp-dev libwebrtc-audio-processing-dev libpulse-dev installs everything voice needs)"
#endif
#include <speex/speex_echo.h>
#include <speex/speex_preprocess.h>
