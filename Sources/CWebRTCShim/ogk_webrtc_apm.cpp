#include "ogk_webrtc_apm.h"

#if !__has_include(<webrtc/modules/audio_processing/include/audio_processing.h>)
#error "webrtc-audio-processing's headers are missing: install Debian's libwebrtc-audio-processing-dev (sudo apt-get install libopus-dev libspeexdsp-dev libwebrtc-audio-processing-dev libpulse-dev installs everything voice needs)"
#endif
#include <webrtc/modules/audio_processing/include/audio_processing.h>
#include <webrtc/modules/interface/module_common_types.h>

#include <cstring>

struct ogk_apm {
    webrtc::AudioProcessing *apm;
    webrtc::AudioFrame far;
    webrtc::AudioFrame near;
    int rate;
};

static void fill(webrtc::AudioFrame &frame, int rate, const short *samples, int count) {
    frame.sample_rate_hz_ = rate;
    frame.num_channels_ = 1;
    frame.samples_per_channel_ = count;
    std::memcpy(frame.data_, samples, sizeof(short) * count);
}

extern "C" ogk_apm *ogk_apm_create(int sample_rate, int suppression, int noise_suppression) {
    webrtc::Config config;
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(true));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(true));
    if (suppression < 0 || suppression > 2) return nullptr;
    webrtc::AudioProcessing *apm = webrtc::AudioProcessing::Create(config);
    const webrtc::EchoCancellation::SuppressionLevel levels[] = {
        webrtc::EchoCancellation::kLowSuppression,
        webrtc::EchoCancellation::kModerateSuppression,
        webrtc::EchoCancellation::kHighSuppression,
    };
    if (apm == nullptr) return nullptr;
    bool ok = apm->echo_cancellation()->enable_drift_compensation(false) == 0
        && apm->echo_cancellation()->set_suppression_level(levels[suppression]) == 0
        && apm->echo_cancellation()->Enable(true) == 0
        && apm->high_pass_filter()->Enable(true) == 0;
    if (ok && noise_suppression) {
        ok = apm->noise_suppression()->set_level(webrtc::NoiseSuppression::kModerate) == 0
            && apm->noise_suppression()->Enable(true) == 0;
    }
    if (!ok) {
        delete apm;
        return nullptr;
    }
    ogk_apm *result = new ogk_apm();
    result->apm = apm;
    result->rate = sample_rate;
    return result;
}

extern "C" void ogk_apm_destroy(ogk_apm *apm) {
    if (apm == nullptr) return;
    delete apm->apm;
    delete apm;
}

extern "C" int ogk_apm_analyze_far(ogk_apm *apm, const short *samples, int count) {
    if (count != apm->rate / 100) return -1;
    fill(apm->far, apm->rate, samples, count);
    return apm->apm->ProcessReverseStream(&apm->far);
}

extern "C" int ogk_apm_process_near(ogk_apm *apm, short *samples, int count, int delay_ms) {
    if (count != apm->rate / 100) return -1;
    fill(apm->near, apm->rate, samples, count);
    apm->apm->set_stream_delay_ms(delay_ms);
    int status = apm->apm->ProcessStream(&apm->near);
    if (status == 0) std::memcpy(samples, apm->near.data_, sizeof(short) * count);
    return status;
}
