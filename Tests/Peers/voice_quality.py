"""Speech quality of a degraded recording against its reference: PESQ-WB (ITU-T P.862.2, PyPI
`pesq`) and STOI (PyPI `pystoi`), after aligning the two by cross-correlation.

    python voice_quality.py REFERENCE.wav DEGRADED.wav [REFERENCE.wav DEGRADED.wav ...] [--max-delay-ms 2000]

Both files are 16 kHz mono 16-bit. Prints one JSON object per pair, one per line, in order:
pesq_wb, stoi, delay_ms (how much later the degraded signal starts), correlation (normalised
peak, 0..1). PESQ is null when the library refuses the pair (for instance no speech detected in
the degraded file). Several pairs in one run save the interpreter's start for each.
"""
import json
import sys
import wave

import numpy as np
from pesq import pesq
from pystoi import stoi

RATE = 16000


def read(path):
    with wave.open(path, "rb") as w:
        if w.getframerate() != RATE or w.getsampwidth() != 2:
            raise SystemExit(f"{path}: need 16 kHz 16-bit, got {w.getframerate()} Hz {8 * w.getsampwidth()} bits")
        data = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
        if w.getnchannels() > 1:
            data = data.reshape(-1, w.getnchannels()).mean(axis=1)
        return data / 32768.0


def align(ref, deg, max_delay):
    """Lag (samples) at which deg best matches ref, searched over 0..max_delay and a little before."""
    n = 1
    while n < len(ref) + len(deg):
        n *= 2
    spectrum = np.fft.rfft(deg, n) * np.conj(np.fft.rfft(ref, n))
    corr = np.fft.irfft(spectrum, n)
    lags = np.concatenate([np.arange(0, max_delay + 1), np.arange(-min(max_delay, 800), 0)])
    values = corr[lags % n]
    best = int(lags[int(np.argmax(values))])
    norm = np.sqrt(np.sum(ref ** 2) * np.sum(deg ** 2))
    return best, float(np.max(values) / norm) if norm > 0 else 0.0


def main():
    args = sys.argv[1:]
    max_delay_ms = 2000
    if "--max-delay-ms" in args:
        i = args.index("--max-delay-ms")
        max_delay_ms = int(args[i + 1])
        del args[i:i + 2]
    if not args or len(args) % 2:
        raise SystemExit("usage: voice_quality.py REFERENCE.wav DEGRADED.wav [REFERENCE.wav DEGRADED.wav ...] [--max-delay-ms N]")
    for index in range(0, len(args), 2):
        print(json.dumps(score(read(args[index]), read(args[index + 1]), max_delay_ms)), flush=True)


def score(ref, deg, max_delay_ms):
    lag, correlation = align(ref, deg, max_delay_ms * RATE // 1000)
    if lag >= 0:
        deg = deg[lag:]
    else:
        deg = np.concatenate([np.zeros(-lag), deg])
    length = min(len(ref), len(deg))
    ref, deg = ref[:length], deg[:length]
    try:
        pesq_wb = float(pesq(RATE, ref, deg, "wb"))
    except Exception:  # the library's own errors (no utterances found and the like)
        pesq_wb = None
    return {
        "pesq_wb": pesq_wb,
        "stoi": float(stoi(ref, deg, RATE, extended=False)),
        "delay_ms": lag * 1000.0 / RATE,
        "correlation": correlation,
    }


if __name__ == "__main__":
    main()
