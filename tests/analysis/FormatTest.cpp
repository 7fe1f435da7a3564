// analysis::diagnosisWhere (Format.h): a diagnosis's coordinates as the viewer's Run info lists
// them, only those that apply — the file's -1 ("none") is never shown ("it-1 seq-1 waits on -1"
// was).
#include <gtest/gtest.h>

#include "core/analysis/Format.h"

namespace stagescope::analysis {
namespace {

TEST(Format, DiagnosisWhereShowsOnlyTheCoordinatesThatApply) {
  events::DiagnosisRecord d;
  d.kind = events::DiagnosisKind::Timeout;
  d.rank = 2;
  d.iteration = 0;
  d.actionSeq = 5;
  d.waitsOnRank = 3;
  EXPECT_EQ(diagnosisWhere(d), "[timeout] rank 2, iteration 0, action #5, waits on rank 3");
  d.kind = events::DiagnosisKind::Hang;
  d.iteration = d.actionSeq = d.waitsOnRank = -1;
  EXPECT_EQ(diagnosisWhere(d), "[hang] rank 2");
  d.rank = -1;
  d.iteration = 1;
  EXPECT_EQ(diagnosisWhere(d), "[hang] iteration 1");
  d.iteration = -1;
  EXPECT_EQ(diagnosisWhere(d), "[hang]");
}

}  // namespace
}  // namespace stagescope::analysis
