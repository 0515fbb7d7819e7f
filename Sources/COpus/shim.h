// libopus for Swift. Opus configures its encoder and decoder with variadic macros
// (opus_encoder_ctl(st, OPUS_SET_BITRATE(x))), which Swift cannot call; these inline functions
// are the typed calls GameKitVoiceEngine needs.
#if !__has_include(<opus/opus.h>)
#error "libopus's headers are missing: install Debian's libopus-dev (sudo apt-get install libopus-dev libspeexdsp-dev libwebrtc-audio-processing-dev libpulse-dev installs everything voice needs)"
#endif
#include <opus/opus.h>

static inline int ogk_opus_set_bitrate(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_BITRATE(v)); }
static inline int ogk_opus_set_inband_fec(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_INBAND_FEC(v)); }
static inline int ogk_opus_set_packet_loss_perc(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_PACKET_LOSS_PERC(v)); }
static inline int ogk_opus_set_dtx(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_DTX(v)); }
static inline int ogk_opus_set_complexity(OpusEncoder *e, opus_int32 v) { return opus_encoder_ctl(e, OPUS_SET_COMPLEXITY(v)); }
static inline int ogk_opus_set_signal_voice(OpusEncoder *e) { return opus_encoder_ctl(e, OPUS_SET_SIGNAL(OPUS_SIGNAL_VOICE)); }
static inline int ogk_opus_get_lookahead(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(v)); }
static inline int ogk_opus_get_packet_loss_perc(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_PACKET_LOSS_PERC(v)); }
static inline int ogk_opus_get_in_dtx(OpusEncoder *e, opus_int32 *v) { return opus_encoder_ctl(e, OPUS_GET_IN_DTX(v)); }
