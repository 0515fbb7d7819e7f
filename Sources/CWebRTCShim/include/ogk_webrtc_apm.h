// A C face for webrtc-audio-processing 0.3 (C++), so that Swift can use its echo canceller.
// Mono, 16-bit samples, 10 ms frames at 8, 16, 32 or 48 kHz.
#ifndef OGK_WEBRTC_APM_H
#define OGK_WEBRTC_APM_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ogk_apm ogk_apm;

/// Creates a processor: echo cancellation (AEC with the extended filter and delay-agnostic
/// alignment) at suppression level `suppression` (0 low, 1 moderate, 2 high), noise suppression
/// when `noise_suppression` is non-zero, and the high-pass filter. Returns NULL if the library
/// refuses the configuration.
ogk_apm *ogk_apm_create(int sample_rate, int suppression, int noise_suppression);
void ogk_apm_destroy(ogk_apm *apm);

/// Feeds one 10 ms frame of what the loudspeaker plays (the far end). Returns 0 or a library error.
int ogk_apm_analyze_far(ogk_apm *apm, const short *samples, int count);

/// Cleans one 10 ms frame of the microphone in place. `delay_ms` is the known delay between
/// playing a sample and hearing it back (the library searches around it). Returns 0 or an error.
int ogk_apm_process_near(ogk_apm *apm, short *samples, int count, int delay_ms);

#ifdef __cplusplus
}
#endif

#endif
