// The one pairing rule: which send record and which receive record are one message.  The
// reader fills RunModel::pairs with it, core/analysis pairs a model that has none with it
// (analysis::pairsOf), and the tests' synthetic runs pair with it; nothing else decides.
//
// The rule:
// - A message's key is (edge, direction, iteration, microbatch, srcRank, dstRank).  Records of
//   one key are the sides of that key's messages, in whatever order the input holds them: the
//   input need not be sorted (already sorted by the key, as the reader leaves it, it is paired
//   in one pass; otherwise it is ordered by the key first, O(n log n)).
// - Within a key, the k-th send (input order) pairs with the k-th receive (input order), as
//   captured jobs pair the k-th send of a channel with its k-th receive.
// - Every record is in exactly one pair.  A send with no k-th receive is a pair with recv -1
//   (a missing receive), a receive with no k-th send one with send -1 (a missing send).
//   So a message sent twice (a retry, a duplicated chunk) and received once gives one
//   complete pair and one send without a receive: the extra record is shown, never silently
//   dropped (the tests' synthetic runs used to keep only each key's first send and receive).
// - A complete pair compares its sides: shapeMatches (shape alone), dtypeMatches, and
//   checksumMatches (false only when both sides recorded a checksum and they differ).
// - The pairs are ordered by the position of their send, or of their receive when there is no
//   send: for input sorted as the reader leaves it (sends before receives within a key) that
//   is input order.
#pragma once

#include <cstdint>
#include <vector>

#include "core/events/Events.h"
#include "core/model/RunModel.h"

namespace stagescope::model {

// One pair per message of `transfers` (positions into it), by the rule above.
std::vector<TransferPair> pairTransfers(const std::vector<events::TransferRecord>& transfers);

// The pair of positions `send` and `recv` (either may be -1) with its sides compared.
TransferPair makePair(const std::vector<events::TransferRecord>& transfers, int64_t send,
                      int64_t recv);

}  // namespace stagescope::model
