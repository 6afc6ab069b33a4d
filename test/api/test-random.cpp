// The generator behind cookies, free-list keys and (secure builds) the order
// of fresh blocks: ChaCha20's block function checked against the test vector
// of RFC 8439, section 2.3.2 (it is the secure build's generator).
#include <gtest/gtest.h>

#include <cstdint>

extern "C" void _mi_chacha20_block(const uint32_t input[16], uint32_t output[16]);

namespace {

TEST(Random, ChaCha20BlockMatchesRfc8439) {
  const uint32_t input[16] = {
    0x61707865, 0x3320646e, 0x79622d32, 0x6b206574,   // "expand 32-byte k"
    0x03020100, 0x07060504, 0x0b0a0908, 0x0f0e0d0c,   // key 00:01:02:..:1f
    0x13121110, 0x17161514, 0x1b1a1918, 0x1f1e1d1c,
    0x00000001,                                       // block count 1
    0x09000000, 0x4a000000, 0x00000000                // nonce 00:00:00:09:00:00:00:4a:00:00:00:00
  };
  const uint32_t expected[16] = {
    0xe4e7f110, 0x15593bd1, 0x1fdd0f50, 0xc47120a3,
    0xc7f4d1c7, 0x0368c033, 0x9aaa2204, 0x4e6cd4c3,
    0x466482d2, 0x09aa9f07, 0x05d7c214, 0xa2028bd9,
    0xd19c12b5, 0xb94e16de, 0xe883d0cb, 0x4e3c50a2
  };
  uint32_t output[16];
  _mi_chacha20_block(input, output);
  for (int i = 0; i < 16; i++) EXPECT_EQ(output[i], expected[i]) << "word " << i;
}

}  // namespace
