// The cryptographic and combinatorial core of SecAgg+ (Bell, Bonawitz, Gascón, Lepoint and
// Raykova, "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead", CCS 2020), on
// libsodium: Shamir sharing, signed per-round keys and pairwise seeds, ChaCha20 masks, the random
// neighbour graph with its degree and threshold, and the removal of masks from a masked sum after
// dropouts. No transport and no round state: the coordinator and the devices call these pieces
// at each stage (docs/secure_aggregation.md).
//
// Devices of a round are numbered 0..n-1 (their DeviceIndex); the index orders pairwise masks and
// names devices in refusals. Vectors are words modulo 2^bits, bits in [1, 32], kept in uint32_t.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "federated/errors.h"

namespace tn::federated::secagg {

// Every refusal names what it refuses; `reason` lets a caller choose its answer without parsing.
struct SecAggRefused : Refused {
  enum class Reason {
    Parameter,            // a threshold, width, count or fraction out of range
    BelowThreshold,       // fewer shares than the threshold
    DuplicateShare,       // two shares from the same holder (x coordinate)
    InconsistentShares,   // shares that do not lie on one polynomial, or of different lengths
    BadSignature,         // a round key advertisement whose signature does not verify
    BadKey,               // a public key that gives no shared secret (low order point)
    BothSharesRequested,  // both kinds of share of one device asked for in one unmask request
    BadEnvelope,          // an encrypted share bundle that does not open or is not addressed here
    OutOfOrder,           // a stage's message before its stage, after it, or a second time (a replay)
  };
  SecAggRefused(Reason why, const std::string& message) : Refused(message), reason(why) {}
  Reason reason;
};

using DeviceIndex = uint32_t;
using Bytes32 = std::array<uint8_t, 32>;

// ---- Shamir t-of-n sharing (shamir.cpp) -----------------------------------------------------
// A 32-byte secret is cut into 7-byte chunks, each shared over GF(2^61 - 1).
struct Share {
  uint32_t x = 0;           // the holder's point: its DeviceIndex + 1 (never 0, the secret's)
  std::vector<uint64_t> y;  // one field element per chunk
};

// Shares of `secret` at `points`, any `threshold` of which reconstruct it and fewer reveal
// nothing. Refuses a threshold below 1 or above the number of points, point 0, repeated points.
std::vector<Share> shamir_split(const Bytes32& secret, uint32_t threshold,
                                const std::vector<uint32_t>& points);

// The secret from at least `threshold` shares. Shares past the threshold are checked against the
// polynomial the first ones define (InconsistentShares names the holder that disagrees). Refuses
// fewer shares than the threshold and two shares of one holder, by name.
Bytes32 shamir_combine(const std::vector<Share>& shares, uint32_t threshold);

// ---- Per-round keys (keys.cpp) ----------------------------------------------------------------
using Signature = std::array<uint8_t, 64>;  // Ed25519, detached
// Signs a message with a device's registered Ed25519 identity. Every message signed here starts
// with its own domain tag ("torchnative secagg+ ..."), so the device may sign with the key it signs
// its requests with (proto::SigningKey, whose messages start with another tag).
using Signer = std::function<Signature(std::span<const uint8_t> message)>;

// A device's long-term Ed25519 identity, registered with the coordinator before any round.
struct IdentityKeys {
  Bytes32 public_key{};
  std::array<uint8_t, 64> secret_key{};
  static IdentityKeys generate();
  Signer signer() const;  // signs with a copy of the secret key
};

// What a device advertises at the start of a round: two X25519 public keys, signed with its
// identity over the round, the device index and both keys, so that a coordinator can neither
// substitute a key nor replay one from another round or device.
struct KeyAdvertisement {
  DeviceIndex device = 0;
  Bytes32 mask_key{};     // agrees pairwise mask seeds; its secret is Shamir-shared
  Bytes32 channel_key{};  // encrypts shares between devices; never shared
  std::array<uint8_t, 64> signature{};
};

// A device's secrets for one round: the two X25519 secret keys and its self-mask seed.
struct RoundSecrets {
  Bytes32 mask_secret{};
  Bytes32 channel_secret{};
  Bytes32 self_mask_seed{};
  static RoundSecrets generate();
  KeyAdvertisement advertise(DeviceIndex device, std::string_view round_id, const Signer& sign) const;
  KeyAdvertisement advertise(DeviceIndex device, std::string_view round_id,
                             const IdentityKeys& identity) const;
};

// Refuses (BadSignature, naming the device and round) an advertisement that `identity_key` did
// not sign for `round_id`.
void verify_advertisement(const KeyAdvertisement& advertisement, std::string_view round_id,
                          const Bytes32& identity_key);

// The consistency check (Bell et al.'s, after the original SecAgg's ConsistencyCheck round): a
// device signs, with its identity, the set of survivors the coordinator showed it, so that before
// revealing any share it can see that its neighbours were shown the same set.
Signature sign_survivors(const Signer& sign, DeviceIndex device, std::string_view round_id,
                         const std::vector<DeviceIndex>& survivors);
// Refuses (BadSignature, naming the device and round) a signature `identity_key` did not make over
// exactly `survivors` for `device` in `round_id`.
void verify_survivors(const Signature& signature, DeviceIndex device, std::string_view round_id,
                      const std::vector<DeviceIndex>& survivors, const Bytes32& identity_key);

// The pairwise mask seed of devices `me` and `peer`: BLAKE2b of their X25519 shared point, both
// public keys and indices in device order and the round. Both ends (and the coordinator with a
// dropped device's reconstructed secret) get the same seed. Refuses a peer key that gives no
// shared secret (BadKey) and me == peer.
Bytes32 pairwise_seed(const Bytes32& my_mask_secret, DeviceIndex me, const Bytes32& peer_mask_key,
                      DeviceIndex peer, std::string_view round_id);

// ---- Masks (masks.cpp) ------------------------------------------------------------------------
// `length` words of ChaCha20 (IETF) keystream under `seed`, each reduced modulo 2^bits.
std::vector<uint32_t> expand_mask(const Bytes32& seed, size_t length, unsigned bits);

// x + PRG(self seed) + sum over peers of +PRG(seed) if me < peer, -PRG(seed) if me > peer, all
// modulo 2^bits: in a sum over all devices every pairwise mask appears once with each sign.
// Refuses input words not below 2^bits.
std::vector<uint32_t> mask_input(const std::vector<uint32_t>& input, unsigned bits,
                                 const Bytes32& self_mask_seed, DeviceIndex me,
                                 const std::map<DeviceIndex, Bytes32>& pairwise_seeds);

// sum += term modulo 2^bits (the coordinator's sum of masked inputs). Refuses, leaving the sum as
// it was, a term of another length or with a word not below 2^bits, naming the word: the caller
// names the device.
void add_modular(std::vector<uint32_t>& sum, const std::vector<uint32_t>& term, unsigned bits);

// ---- Neighbour graph and its parameters (graph.cpp) -------------------------------------------
struct ThreatModel {
  double corrupt_fraction = 0;      // devices that may collude with the coordinator, in [0, 1)
  double dropout_fraction = 0;      // devices that may vanish during a round, in [0, 1)
  unsigned security_bits = 40;      // the coordinator learns more than the sum with probability < 2^-this
  unsigned correctness_bits = 20;   // a round fails despite the dropout bound with probability < 2^-this
  bool active_coordinator = false;  // semi-malicious: may send devices inconsistent views
};

struct GraphParameters {
  uint32_t devices = 0;
  uint32_t degree = 0;     // neighbours per device: n - 1 is the complete graph of SecAgg
  uint32_t threshold = 0;  // shares that reconstruct a device's secrets
};

// The smallest even degree (else the complete graph) and a threshold that meet `threat` for
// `devices` devices. Refuses fractions out of range, fewer than 3 devices and a threat model no
// degree meets, by name. Derivation and source: graph.cpp and docs/secure_aggregation.md.
GraphParameters derive_graph_parameters(uint32_t devices, const ThreatModel& threat);

// A random k-regular graph: the Harary graph H(k, n) (each device joined to the k/2 nearest on
// each side of a ring) over a random order of the devices drawn from `seed`, as Bell et al.
// instantiate SecAgg+. Degree n - 1 gives the complete graph.
class NeighbourGraph {
 public:
  // Refuses an odd degree below n - 1, a degree above n - 1 and fewer than 2 devices.
  static NeighbourGraph random_harary(uint32_t devices, uint32_t degree, const Bytes32& seed);
  uint32_t devices() const { return static_cast<uint32_t>(neighbours_.size()); }
  const std::vector<DeviceIndex>& neighbours(DeviceIndex device) const;  // ascending

 private:
  std::vector<std::vector<DeviceIndex>> neighbours_;
};

// ---- Shares between devices (envelope.cpp) ----------------------------------------------------
// What a device deals each neighbour at the share-keys stage, and holds for it afterwards.
struct HeldShares {
  Share self_mask_seed;
  Share mask_secret;
};

// The shares `sender` deals `recipient`, for the coordinator to relay: XChaCha20-Poly1305 under a
// key both agree from their channel keys (X25519 and BLAKE2b, as pairwise_seed, for another
// purpose), with the round, sender and recipient as associated data, so that the coordinator can
// neither read, alter, redirect nor replay them into another round.
std::vector<uint8_t> seal_shares(const HeldShares& shares, const Bytes32& my_channel_secret,
                                 DeviceIndex sender, const Bytes32& recipient_channel_key,
                                 DeviceIndex recipient, std::string_view round_id);

// Refuses (BadEnvelope, naming sender and recipient) an envelope that does not authenticate for
// this round and pair, is malformed, or holds shares dealt at a point other than recipient + 1;
// and what pairwise_seed refuses.
HeldShares open_shares(const std::vector<uint8_t>& envelope, const Bytes32& my_channel_secret,
                       DeviceIndex recipient, const Bytes32& sender_channel_key, DeviceIndex sender,
                       std::string_view round_id);

// ---- Unmasking after dropouts (unmasking.cpp) -------------------------------------------------
enum class ShareKind { SelfMaskSeed, MaskSecret };

// The coordinator's request at the unmask stage: the self-mask shares of devices whose masked
// input is in the sum, the mask-secret shares of devices that shared their keys (so that their
// neighbours masked with them) but whose masked input is not in the sum. A device gone before
// sharing its keys is in neither list: no one masked with it.
struct UnmaskRequest {
  std::vector<DeviceIndex> survivors;
  std::vector<DeviceIndex> dropped;
};

struct RevealedShare {
  DeviceIndex owner = 0;
  ShareKind kind = ShareKind::SelfMaskSeed;
  Share share;
};

// A device's answer: one share per requested neighbour it holds shares of. Refuses
// (BothSharesRequested, naming the device) a request listing one device among both survivors and
// dropped: the two shares together would unmask that device's input.
std::vector<RevealedShare> answer_unmask_request(const std::map<DeviceIndex, HeldShares>& held,
                                                 const UnmaskRequest& request);

// What the coordinator reconstructed from revealed shares (reconstruct_secrets).
struct ReconstructedSecrets {
  std::map<DeviceIndex, Bytes32> self_mask_seeds;  // of survivors
  std::map<DeviceIndex, Bytes32> mask_secrets;     // of dropped devices
};

// Combines the revealed shares per device and kind. Refuses a device with fewer than `threshold`
// shares (BelowThreshold, naming it and the kind), both kinds for one device, and what
// shamir_combine refuses.
ReconstructedSecrets reconstruct_secrets(const std::vector<RevealedShare>& revealed, uint32_t threshold);

// The sum of the survivors' inputs modulo 2^bits from the sum of their masked inputs: removes each
// survivor's self mask and, for each dropped device, the pairwise masks its surviving neighbours
// added for it. `mask_keys` holds every advertised mask key. Refuses a survivor or dropped device
// without its reconstructed secret.
std::vector<uint32_t> unmask_sum(std::vector<uint32_t> masked_sum, unsigned bits, const NeighbourGraph& graph,
                                 std::string_view round_id, const std::map<DeviceIndex, Bytes32>& mask_keys,
                                 const UnmaskRequest& request, const ReconstructedSecrets& secrets);

}  // namespace tn::federated::secagg
