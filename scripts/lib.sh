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

# The package built with its traits switched: OpenSSL on (data packets sealed by libcrypto) and
# PulseAudio off (gk-voice without libpulse), for scripts/check-openssl and
# scripts/check-without-pulseaudio. It is built in the package's own build directory: the
# dependencies compile the same in both builds, so only the package's modules compile again (about
# 30 s on 2 cores, against 150-170 s for a scratch directory of its own, which compiled every
# dependency again). The products are copied out, to OGK_VARIANT_BIN, and the default products a
# check compares them with to OGK_DEFAULT_BIN, so that neither build replaces a binary under a
# check; the next default build compiles the package's modules back.
OGK_VARIANT_TRAITS=OpenSSL
OGK_VARIANT_BIN="$PWD/.build/variant"
OGK_DEFAULT_BIN="$PWD/.build/default"

# ogk_products TRAITS DIRECTORY PRODUCT...: builds these products with TRAITS (empty: the
# package's defaults) and copies them to DIRECTORY; fails, showing them, on any error or warning.
# With OGK_PREBUILT set (scripts/test, which has built them), only checks that they are there.
ogk_products() {
    local traits=() directory="$2" log product
    [[ -z "$1" ]] || traits=(--traits "$1")
    shift 2
    if [[ -n "${OGK_PREBUILT:-}" ]]; then
        for product in "$@"; do
            [[ -x "$directory/$product" ]] || { echo "$directory/$product: not built (OGK_PREBUILT is set)" >&2; return 1; }
        done
        return 0
    fi
    log="$(mktemp)"
    mkdir -p "$directory"
    for product in "$@"; do
        if ! swift build --product "$product" "${traits[@]}" >"$log" 2>&1 \
            || grep -qE "error:|warning:" "$log"; then
            grep -E "error|warning:" "$log" | head -40 >&2
            rm -f "$log"
            return 1
        fi
        cp "$(swift build --show-bin-path)/$product" "$directory/$product"
    done
    rm -f "$log"
}

# ogk_variant_build PRODUCT...: the variant's products, in OGK_VARIANT_BIN.
ogk_variant_build() { ogk_products "$OGK_VARIANT_TRAITS" "$OGK_VARIANT_BIN" "$@"; }
# ogk_default_build PRODUCT...: the default build's products, in OGK_DEFAULT_BIN.
ogk_default_build() { ogk_products "" "$OGK_DEFAULT_BIN" "$@"; }
# ogk_default_copy PRODUCT...: the products `swift build --build-tests` made (scripts/test's own
# build, the package's default traits), copied to OGK_DEFAULT_BIN: the same programs as
# ogk_default_build's, without compiling the package's modules once more in the configuration of
# a plain `swift build`.
ogk_default_copy() {
    local product bin
    bin="$(swift build --show-bin-path)"
    mkdir -p "$OGK_DEFAULT_BIN"
    for product in "$@"; do
        [[ -x "$bin/$product" ]] || { echo "$bin/$product: not built" >&2; return 1; }
        cp "$bin/$product" "$OGK_DEFAULT_BIN/$product"
    done
}
