# What the project's scripts share; `source scripts/lib.sh` (from the package's root).

# ogk_bin PRODUCT...: builds the products (debug) and prints the directory that holds them.
# Inside a sandbox (OGK_SANDBOX=1: a test run, which holds SwiftPM's lock on .build while it
# runs, or `scripts/sandbox bash`), nothing can be built: the products already built are used,
# and a missing one is an error that says so.
ogk_bin() {
    if [[ "${OGK_SANDBOX:-}" == 1 ]]; then
        local bin=".build/debug" product
        for product in "$@"; do
            [[ -x "$bin/$product" ]] || { echo "$product is not built: run 'swift build --product $product' outside the sandbox first" >&2; return 1; }
        done
        echo "$PWD/$bin"
        return
    fi
    local product
    for product in "$@"; do swift build --product "$product" >/dev/null || return 1; done
    swift build --show-bin-path
}

# ogk_wait_for FILE TEXT [COUNT] [SECONDS]: waits until FILE has COUNT lines (default 1) that
# contain TEXT (a fixed string), for at most SECONDS (default 20); fails if they never came.
ogk_wait_for() {
    local tries=$(( ${4:-20} * 20 ))
    for _ in $(seq "$tries"); do
        [[ "$(grep -cF -- "$2" "$1" 2>/dev/null)" -ge "${3:-1}" ]] && return 0
        sleep 0.05
    done
    return 1
}

# The package built with its traits switched, in a scratch directory of its own: OpenSSL on
# (data packets sealed by libcrypto) and PulseAudio off (gk-voice without libpulse). One build
# serves scripts/check-openssl and scripts/check-without-pulseaudio.
OGK_VARIANT_SCRATCH=.build-variant
OGK_VARIANT_TRAITS=OpenSSL

# ogk_variant_build PRODUCT...: builds these products of that variant (quick when up to date);
# fails, showing them, on any error or warning.
ogk_variant_build() {
    local log product
    log="$(mktemp)"
    for product in "$@"; do
        if ! swift build --product "$product" --traits "$OGK_VARIANT_TRAITS" --scratch-path "$OGK_VARIANT_SCRATCH" >"$log" 2>&1 \
            || grep -qE "error:|warning:" "$log"; then
            grep -E "error|warning:" "$log" | head -40 >&2
            rm -f "$log"
            return 1
        fi
    done
    rm -f "$log"
}

# ogk_variant_bin: the directory holding the variant's products.
ogk_variant_bin() {
    swift build --traits "$OGK_VARIANT_TRAITS" --scratch-path "$OGK_VARIANT_SCRATCH" --show-bin-path
}
