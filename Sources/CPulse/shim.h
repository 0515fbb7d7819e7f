// PulseAudio's blocking "simple" API (PipeWire's pipewire-pulse serves it too).
#if !__has_include(<pulse/simple.h>)
#error "PulseAudio's headers are missing: install Debian's libpulse-dev (sudo apt-get install libopus-dev libspeexdsp-dev libwebrtc-audio-processing-dev libpulse-dev installs everything voice needs)"
#endif
#include <pulse/simple.h>
#include <pulse/error.h>
