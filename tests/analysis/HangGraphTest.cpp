// The wait-for graph's sentences (core/analysis/HangGraph.h): a wait's verb ("waits for",
// "waits to send") comes from the edge's typed field, never from how its phrase begins, and the
// verdicts name the awaited message by its own field, never by cutting " from rank " off.
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
  EXPECT_EQ(g.edges[0].awaited, "the activation of microbatch 2");
  EXPECT_FALSE(g.edges[1].toSend);
  EXPECT_EQ(g.edges[1].awaited, "the activation of microbatch 2");
  EXPECT_EQ(g.edges[1].sentence(),
            "rank 1 waits for the activation of microbatch 2 from rank 0 (edge llm:pp0->pp1, "
            "iteration 0, action 3 RF)");
}

events::TransferRecord sent(int src, int dst) {
  events::TransferRecord t;
  t.rank = src;
  t.side = events::Side::Send;
  t.srcRank = src;
  t.dstRank = dst;
  t.iteration = 0;
  t.microbatch = 2;
  t.direction = events::Direction::Activation;
  t.edge = "llm:pp0->pp1";
  return t;
}

// A wait that gave up on a message its partner sent names the message alone.
TEST(WaitEdge, ATooShortWaitNamesTheMessageByItsField) {
  model::RunModel run;
  run.info.worldSize = 2;
  run.waits = {waitRow(1, 0, events::WaitOp::Recv)};
  run.transfers = {sent(0, 1)};
  const WaitGraph g = waitForGraph(run);
  ASSERT_FALSE(g.verdicts.empty()) << g.text();
  EXPECT_EQ(g.verdicts.front().sentence,
            "rank 1 gave up after 5 s on the activation of microbatch 2 that rank 0 had sent: the "
            "timeout is shorter than the message took");
}

// A broadcast's message is the broadcast; a collective's is its whole phrase, even where the
// job's group name holds " from rank " (cutting the phrase there would end it inside the name).
TEST(WaitEdge, ABroadcastAndACollectiveNameTheirOwnMessage) {
  model::RunModel run;
  run.info.worldSize = 2;
  events::WaitRecord broadcast = waitRow(0, 1, events::WaitOp::Broadcast);
  events::WaitRecord collective = waitRow(1, -1, events::WaitOp::Collective);
  collective.edge = "pp from rank 0";
  events::CollectiveRecord mine;
  mine.rank = 1;
  mine.iteration = 0;
  mine.groupSeq = 2;
  mine.op = "all_reduce";
  mine.group = collective.edge;
  mine.groupRanks = {0, 1};
  run.collectives = {mine};
  run.waits = {broadcast, collective};
  const WaitGraph g = waitForGraph(run);
  ASSERT_EQ(g.edges.size(), 2u) << g.text();
  EXPECT_EQ(g.edges[0].awaited, "the boundary broadcast");
  EXPECT_EQ(g.edges[0].waiting(), "waits for the boundary broadcast from rank 1");
  EXPECT_EQ(g.edges[1].awaited, "all_reduce #2 of group pp from rank 0, not joined by rank 0");
  EXPECT_EQ(g.edges[1].awaited, g.edges[1].waitsFor);
}

}  // namespace
}  // namespace stagescope::analysis
