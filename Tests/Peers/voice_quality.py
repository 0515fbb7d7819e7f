"""Speech quality of a degraded recording against its reference: PESQ-WB (ITU-T P.862.2, PyPI
`pesq`) and STOI (PyPI `pystoi`), after aligning the two by cross-correlation.

    python voice_quality.py REFERENCE.wav DEGRADED.wav [REFERENCE.wav DEGRADED.wav ...] [--max-delay-ms 2000]
    python voice_quality.py --serve [--max-delay-ms 2000]

With --serve it reads pairs from standard input, one per line (REFERENCE.wav, a tab, DEGRADED.wav),
and answers each with its line as soon as it is scored, until the input ends: a benchmark that
scores many pairs one after another starts the interpreter (numpy and the two libraries, about as
long as scoring a pair) once. A pair it cannot read is answered with {"error": "..."}.

Both files are 16 kHz mono 16-bit. Prints one JSON object per pair, one per line, in order:
pesq_wb, stoi, stoi_global, delay_ms (how much later the degraded signal starts), delay_spread_ms,
correlation (normalised peak, 0..1). PESQ is null when the library refuses the pair (for instance
no speech detected in the degraded file). Several pairs in one run save the interpreter's start
for each.

PESQ aligns each utterance itself (P.862's time alignment); STOI does not, and a receiver whose
playout delay moves during the call (an adaptive jitter buffer that stretches and shrinks) is
misaligned by tens of milliseconds in parts of it under one global alignment, which STOI counts
as lost intelligibility. So `stoi` is computed after aligning each utterance of the reference
(runs of 20 ms frames above -45 dBFS, gaps under 150 ms bridged) on its own, within 300 ms of the
global lag, over the same stretch of the reference as the global figure (a recording that ends
early is scored over what it covers); `stoi_global` is STOI under the global alignment alone, and
`delay_spread_ms` how far the utterances' lags spread. A pipeline with a constant delay scores
the same both ways.
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
    if args == ["--serve"]:
        serve(max_delay_ms)
        return
    if not args or len(args) % 2:
        raise SystemExit("usage: voice_quality.py REFERENCE.wav DEGRADED.wav [REFERENCE.wav DEGRADED.wav ...] [--max-delay-ms N]"
                         " | voice_quality.py --serve [--max-delay-ms N]")
    for index in range(0, len(args), 2):
        print(json.dumps(score(read(args[index]), read(args[index + 1]), max_delay_ms)), flush=True)


def serve(max_delay_ms):
    for line in sys.stdin:
        paths = line.rstrip("\n").split("\t")
        if len(paths) != 2:
            print(json.dumps({"error": f"expected REFERENCE<tab>DEGRADED, got {line.strip()!r}"}), flush=True)
            continue
        try:
            result = score(read(paths[0]), read(paths[1]), max_delay_ms)
        except (OSError, EOFError, wave.Error, SystemExit) as error:
            result = {"error": str(error)}
        print(json.dumps(result), flush=True)


FRAME = RATE // 50  # 20 ms
UTTERANCE_LEVEL_DB = -45.0
UTTERANCE_GAP_FRAMES = 150 // 20
UTTERANCE_SEARCH = 300 * RATE // 1000
UTTERANCE_MARGIN = 100 * RATE // 1000


def utterances(ref):
    """(start, end) sample ranges of the reference's speech: frames above the level, short gaps bridged."""
    frames = len(ref) // FRAME
    if frames == 0:
        return []
    power = (ref[:frames * FRAME].reshape(frames, FRAME) ** 2).mean(axis=1)
    active = 10 * np.log10(np.maximum(power, 1e-12)) > UTTERANCE_LEVEL_DB
    spans, index = [], 0
    while index < frames:
        if not active[index]:
            index += 1
            continue
        end = index
        while end < frames and active[end:end + UTTERANCE_GAP_FRAMES + 1].any():
            end += 1
        spans.append((index * FRAME, end * FRAME))
        index = end
    return spans


def aligned_per_utterance(ref, deg, lag, spans):
    """`deg` rebuilt on the reference's time line, each utterance of `spans` (with a margin) taken
    at its own best lag within UTTERANCE_SEARCH of `lag`; silence elsewhere. Returns it and the
    lags' spread."""
    out = np.zeros(len(ref))
    lags = []
    for start, end in spans:
        a, b = max(0, start - UTTERANCE_MARGIN), min(len(ref), end + UTTERANCE_MARGIN)
        segment = ref[a:b]
        lo = max(0, a + lag - UTTERANCE_SEARCH)
        hi = min(len(deg), b + lag + UTTERANCE_SEARCH)
        window = deg[lo:hi]
        if len(window) < len(segment):
            # The recording ends within this utterance's search: the global lag, as far as it goes.
            piece = deg[a + lag:b + lag]
            out[a:a + len(piece)] = piece
            continue
        n = 1
        while n < len(window) + len(segment):
            n *= 2
        corr = np.fft.irfft(np.fft.rfft(window, n) * np.conj(np.fft.rfft(segment, n)), n)[:len(window) - len(segment) + 1]
        best = lo + int(np.argmax(corr))
        lags.append(best - a)
        out[a:b] = deg[best:best + (b - a)]
    spread = (max(lags) - min(lags)) * 1000.0 / RATE if lags else 0.0
    return out, spread


def score(ref, deg, max_delay_ms):
    lag, correlation = align(ref, deg, max_delay_ms * RATE // 1000)
    # A degraded signal that starts early gets silence in front, and then starts at 0.
    padded = deg if lag >= 0 else np.concatenate([np.zeros(-lag), deg])
    start = max(lag, 0)
    shifted = padded[start:]
    length = min(len(ref), len(shifted))
    ref_cut, shifted = ref[:length], shifted[:length]
    try:
        pesq_wb = float(pesq(RATE, ref_cut, shifted, "wb"))
    except Exception:  # the library's own errors (no utterances found and the like)
        pesq_wb = None
    stoi_global = float(stoi(ref_cut, shifted, RATE, extended=False))
    # Per utterance, over the same stretch of the reference as the global figure (a recording that
    # ends early is scored over what it covers); a reference with no speech keeps the global figure.
    spans = utterances(ref_cut)
    per_utterance, spread = aligned_per_utterance(ref_cut, padded, start, spans)
    stoi_aligned = float(stoi(ref_cut, per_utterance, RATE, extended=False)) if spans else stoi_global
    return {
        "pesq_wb": pesq_wb,
        "stoi": stoi_aligned,
        "stoi_global": stoi_global,
        "delay_ms": lag * 1000.0 / RATE,
        "delay_spread_ms": spread,
        "correlation": correlation,
    }


if __name__ == "__main__":
    main()
