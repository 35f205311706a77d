// Rank and world size from launchers' environments (exec/launch/rank_env.h): one case per
// launcher, and the conflicts and bad values named.
#include <gtest/gtest.h>

#include "embedscope/engine/exec/launch/rank_env.h"
#include "embedscope/engine/workload/spec_error.h"

using embedscope::engine::SpecError;
using embedscope::engine::launch::launch_from_environment;

namespace {
std::string error_of(const std::map<std::string, std::string>& env) {
  try {
    launch_from_environment(env);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(RankEnv, NoLauncherIsNone) { EXPECT_FALSE(launch_from_environment({{"HOME", "/root"}}).has_value()); }

TEST(RankEnv, OpenMpi) {
  const auto e = launch_from_environment({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                          {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                          {"OMPI_MCA_ess_base_jobid", "1234"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->launcher, "Open MPI");
  EXPECT_EQ(e->rank, 2);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->node, -1);
  EXPECT_EQ(e->run_id, "ompi-1234");
}

TEST(RankEnv, Slurm) {
  const auto e = launch_from_environment({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                          {"SLURM_NODEID", "2"}, {"SLURM_JOB_ID", "777"}, {"SLURM_STEP_ID", "0"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->launcher, "Slurm");
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 0);
  EXPECT_EQ(e->node, 2);
  EXPECT_EQ(e->run_id, "slurm-777.0");
}

TEST(RankEnv, Torchrun) {
  const auto e = launch_from_environment({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "2"}, {"GROUP_RANK", "1"}, {"TORCHELASTIC_RUN_ID", "abc"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->launcher, "torchrun");
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->node, 1);  // GROUP_RANK: torchrun's node
  EXPECT_EQ(e->run_id, "torchrun-abc");
}

TEST(RankEnv, SlurmTasksPerNodeIsTheLocalWorldSize) {
  const auto e = launch_from_environment({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                                          {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_NODEID", "1"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->node, 1);
  EXPECT_EQ(e->local_rank, 1);
}

TEST(RankEnv, AgreeingLaunchersAreFineAndTheFirstWins) {
  // srun of an Open MPI program sets both; they agree
  const auto e = launch_from_environment(
      {{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->launcher, "Open MPI");
}

TEST(RankEnv, ConflictsAndBadValuesAreNamed) {
  EXPECT_EQ(error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"SLURM_PROCID", "2"},
                      {"SLURM_NTASKS", "4"}}),
            "OMPI_COMM_WORLD_RANK=1 but SLURM_PROCID=2: the Open MPI and Slurm ranks disagree; unset one");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}}),
            "SLURM_NTASKS=4 but WORLD_SIZE=2: the Slurm and torchrun world sizes disagree; unset one");
  EXPECT_EQ(error_of({{"RANK", "1"}}), "RANK is set (torchrun rank) but WORLD_SIZE is not: the world size is unknown");
  EXPECT_EQ(error_of({{"RANK", "x1"}, {"WORLD_SIZE", "2"}}), "RANK=x1: not a whole number >= 0");
  EXPECT_EQ(error_of({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE=0: not a whole number >= 1");
  EXPECT_EQ(error_of({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), "RANK=4 is not below WORLD_SIZE=4");
  EXPECT_EQ(error_of({{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "4"}}), "SLURM_PROCID=-1: not a whole number >= 0");
}
