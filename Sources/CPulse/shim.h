// PulseAudio's blocking "simple" API (PipeWire's pipewire-pulse serves it too).
#include <pulse/simple.h>
#include <pulse/error.h>
