// OpenSSL's libcrypto (EVP) for the transport's optional packet-cipher backend (package trait
// "OpenSSL"). Only library calls: one cipher context per key, given a new nonce and direction
// per packet (the key schedule stays), so a packet costs no allocation and no key setup.
#if !__has_include(<openssl/evp.h>)
#error "OpenSSL's headers are missing: install Debian's libssl-dev, or build without the OpenSSL trait"
#endif
#include <openssl/evp.h>
#include <stddef.h>
#include <stdint.h>

/// cipher: 1 = ChaCha20-Poly1305, 2 = AES-256-GCM. NULL on failure.
static inline EVP_CIPHER_CTX *ogk_aead_new(int cipher, const uint8_t *key) {
    const EVP_CIPHER *type = cipher == 2 ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL) return NULL;
    if (EVP_CipherInit_ex(ctx, type, NULL, key, NULL, 1) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

static inline void ogk_aead_free(EVP_CIPHER_CTX *ctx) { EVP_CIPHER_CTX_free(ctx); }

/// Writes length bytes of ciphertext then the 16-byte tag to out. 1 on success.
static inline int ogk_aead_seal(EVP_CIPHER_CTX *ctx, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                                const uint8_t *plaintext, size_t length, uint8_t *out) {
    int written = 0, final = 0;
    if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 1) != 1) return 0;
    if (aad_length > 0 && EVP_CipherUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return 0;
    if (EVP_CipherUpdate(ctx, out, &written, plaintext, (int)length) != 1) return 0;
    if (EVP_CipherFinal_ex(ctx, out + written, &final) != 1) return 0;
    return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, out + length) == 1;
}

/// Opens length bytes of ciphertext followed by the 16-byte tag into out (length bytes).
/// 1 when it authenticates.
static inline int ogk_aead_open(EVP_CIPHER_CTX *ctx, const uint8_t *nonce, const uint8_t *aad, size_t aad_length,
                                const uint8_t *ciphertext, size_t length, uint8_t *out) {
    int written = 0, final = 0;
    if (EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, 0) != 1) return 0;
    if (aad_length > 0 && EVP_CipherUpdate(ctx, NULL, &written, aad, (int)aad_length) != 1) return 0;
    if (EVP_CipherUpdate(ctx, out, &written, ciphertext, (int)length) != 1) return 0;
    if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, (void *)(ciphertext + length)) != 1) return 0;
    return EVP_CipherFinal_ex(ctx, out + written, &final) == 1;
}
