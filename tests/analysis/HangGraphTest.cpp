// The wait-for graph's sentences (core/analysis/HangGraph.h): a wait's verb ("waits for",
// "waits to send") comes from the edge's typed field, never from how its phrase begins.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/HangGraph.h"

namespace stagescope::analysis {
namespace {

events::WaitRecord waitRow(int rank, int peer, events::WaitOp op) {
  events::WaitRecord w;
  w.rank = rank;
  w.peer = peer;
  w.op = op;
  w.iteration = 0;
  w.actionSeq = 3;
  w.action = op == events::WaitOp::Send ? events::ActionKind::SendForward
                                        : events::ActionKind::RecvForward;
  w.microbatch = 2;
  w.edge = "llm:pp0->pp1";
  w.direction = events::Direction::Activation;
  w.timeoutSeconds = 5;
  return w;
}

// The verb is the field's: a send is "waits to send" though its phrase does not say "to send".
TEST(WaitEdge, TheVerbIsTheTypedFieldsNotThePhrases) {
  WaitEdge e;
  e.rank = 0;
  e.waitsFor = "the activation of microbatch 1 to rank 1";
  e.toSend = true;
  EXPECT_EQ(e.waiting(), "waits to send the activation of microbatch 1 to rank 1");
  e.toSend = false;
  e.waitsFor = "to send queue of rank 3";  // a phrase that happens to begin with "to send "
  EXPECT_EQ(e.waiting(), "waits for to send queue of rank 3");
}

// From the waits rows: the sending rank waits to send, the receiving one waits for.
TEST(WaitEdge, ASendRowWaitsToSendAReceiveRowWaitsFor) {
  model::RunModel run;
  run.info.worldSize = 2;
  run.waits = {waitRow(0, 1, events::WaitOp::Send), waitRow(1, 0, events::WaitOp::Recv)};
  const WaitGraph g = waitForGraph(run);
  ASSERT_EQ(g.edges.size(), 2u) << g.text();
  EXPECT_TRUE(g.edges[0].toSend);
  EXPECT_EQ(g.edges[0].sentence(),
            "rank 0 waits to send the activation of microbatch 2 to rank 1 (edge llm:pp0->pp1, "
            "iteration 0, action 3 SF)");
  EXPECT_FALSE(g.edges[1].toSend);
  EXPECT_EQ(g.edges[1].sentence(),
            "rank 1 waits for the activation of microbatch 2 from rank 0 (edge llm:pp0->pp1, "
            "iteration 0, action 3 RF)");
}

}  // namespace
}  // namespace stagescope::analysis
