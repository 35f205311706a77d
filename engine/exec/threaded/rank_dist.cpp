// The output dist of a batch (pooled embeddings to the ranks owning the samples) and its unpacking.
#include "rank.h"

namespace embedscope::engine::threaded {

void Rank::start_output_dist(Inflight& b, bool async) {
  const int W = L_.world;
  const int64_t B = L_.B;
  const CommPrecision prec = sh_.spec.qcomms.forward_precision;
  auto& od = b.od;
  const int64_t step = step_;
  std::vector<std::function<void()>> jobs;  // run in order on the comm worker
  {
    // table_wise / column_wise: all-to-all of B x cols blocks
    od.a2a_scount.assign(static_cast<size_t>(W), 0);
    od.a2a_rcount.assign(static_cast<size_t>(W), 0);
    const auto& my_a2a = L_.a2a_slots_to[static_cast<size_t>(me_)];
    int64_t my_cols = 0;
    for (int k : my_a2a) my_cols += L_.slots[static_cast<size_t>(k)].s.num_cols;
    for (int r = 0; r < W; ++r) {
      od.a2a_scount[static_cast<size_t>(r)] = B * my_cols;
      for (int k : L_.a2a_slots_to[static_cast<size_t>(r)]) od.a2a_rcount[static_cast<size_t>(r)] += B * L_.slots[static_cast<size_t>(k)].s.num_cols;
    }
    od.a2a_send = buf<float>("comm_buffer", static_cast<size_t>(W * B * my_cols));
    size_t p = 0;
    for (int r = 0; r < W; ++r)
      for (int k : my_a2a) {
        const size_t lk = local_slot(k);
        const int64_t cols = L_.slots[static_cast<size_t>(k)].s.num_cols;
        std::memcpy(od.a2a_send.data() + p, b.slot_out[lk].data() + r * B * cols, sizeof(float) * static_cast<size_t>(B * cols));
        p += static_cast<size_t>(B * cols);
      }
    od.a2a_recv = buf<float>("comm_buffer", static_cast<size_t>(std::accumulate(od.a2a_rcount.begin(), od.a2a_rcount.end(), int64_t{0})));
    jobs.push_back([this, &od, prec, step] {
      on_comm_lane(*world_, "output_dist/all_to_all", step, [&] {
        world_->all_to_all_q("output_dist/all_to_all", od.a2a_send.data(), od.a2a_scount, od.a2a_recv.data(),
                             od.a2a_rcount, prec, &fwd_error_);
      });
    });
    // row_wise: reduce-scatter of partial sums over the world
    const int64_t rw_width = L_.sum_dims(L_.rw_features);
    if (!L_.rw_features.empty()) {
      od.rw_send = buf<float>("comm_buffer", static_cast<size_t>(W * B * rw_width));
      p = 0;
      for (int j = 0; j < W; ++j)
        for (int f : L_.rw_features) {
          const size_t k = slot_of_feature_on_me(f);
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          std::memcpy(od.rw_send.data() + p, b.slot_out[k].data() + j * B * dim, sizeof(float) * static_cast<size_t>(B * dim));
          p += static_cast<size_t>(B * dim);
        }
      od.rw_recv = buf<float>("comm_buffer", static_cast<size_t>(B * rw_width));
      od.rw_counts.assign(static_cast<size_t>(W), B * rw_width);
      jobs.push_back([this, &od, prec, step] {
        on_comm_lane(*world_, "output_dist/reduce_scatter", step, [&] {
          world_->reduce_scatter_q("output_dist/reduce_scatter", od.rw_send.data(), od.rw_counts, od.rw_recv.data(), prec,
                                   &fwd_error_);
        });
      });
    }
    // table_row_wise: reduce-scatter inside the node, then all-to-all across nodes
    if (node_) {
      const int my_node = me_ / L_.local;
      const auto& feats = L_.twrw_features[static_cast<size_t>(my_node)];
      const int64_t width = L_.sum_dims(feats);
      // block for local rank l: [feature][node m][B x dim] rows of sample owner m*local + l
      od.tw_send = buf<float>("comm_buffer", static_cast<size_t>(L_.local * L_.nodes * B * width));
      p = 0;
      for (int l = 0; l < L_.local; ++l)
        for (int f : feats) {
          const size_t k = slot_of_feature_on_me(f);
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          for (int m = 0; m < L_.nodes; ++m) {
            std::memcpy(od.tw_send.data() + p, b.slot_out[k].data() + (m * L_.local + l) * B * dim, sizeof(float) * static_cast<size_t>(B * dim));
            p += static_cast<size_t>(B * dim);
          }
        }
      od.tw_rs = buf<float>("comm_buffer", static_cast<size_t>(L_.nodes * B * width));
      od.tw_counts.assign(static_cast<size_t>(L_.local), L_.nodes * B * width);
      od.tw_scount.assign(static_cast<size_t>(L_.nodes), B * width);
      od.tw_rcount.assign(static_cast<size_t>(L_.nodes), 0);
      for (int m = 0; m < L_.nodes; ++m) od.tw_rcount[static_cast<size_t>(m)] = B * L_.sum_dims(L_.twrw_features[static_cast<size_t>(m)]);
      od.tw_a2a_send = buf<float>("comm_buffer", od.tw_rs.size());
      od.tw_recv = buf<float>("comm_buffer", static_cast<size_t>(std::accumulate(od.tw_rcount.begin(), od.tw_rcount.end(), int64_t{0})));
      jobs.push_back([this, &od, &feats, B, prec, step] {
        on_comm_lane(*node_, "output_dist/reduce_scatter_intra_node", step, [&] {
          node_->reduce_scatter_q("output_dist/reduce_scatter_intra_node", od.tw_send.data(), od.tw_counts, od.tw_rs.data(),
                                  prec, &fwd_error_);
        });
        // rs: [feature][node m][B x dim] -> send block m to node m
        size_t q0 = 0;
        for (int m = 0; m < L_.nodes; ++m) {
          size_t q = 0;
          for (int f : feats) {
            const int64_t dim = L_.dim[static_cast<size_t>(f)];
            std::memcpy(od.tw_a2a_send.data() + q0, od.tw_rs.data() + q + static_cast<size_t>(m * B * dim), sizeof(float) * static_cast<size_t>(B * dim));
            q0 += static_cast<size_t>(B * dim);
            q += static_cast<size_t>(L_.nodes * B * dim);
          }
        }
        on_comm_lane(*cross_, "output_dist/all_to_all_cross_node", step, [&] {
          cross_->all_to_all_q("output_dist/all_to_all_cross_node", od.tw_a2a_send.data(), od.tw_scount, od.tw_recv.data(),
                               od.tw_rcount, prec, &fwd_error_);
        });
      });
    }
  }
  auto job = [jobs = std::move(jobs)] {
    for (const auto& j : jobs) j();
  };
  if (async)
    b.output_dist = comm_->submit(std::move(job));
  else
    comm_->run(std::move(job));
}

void Rank::finish_output_dist(Inflight& b) {
  if (b.output_dist.valid()) b.output_dist.get();
  const int W = L_.world;
  const int64_t B = L_.B;
  const int F = static_cast<int>(sh_.spec.features.size());
  auto& od = b.od;
  {
    size_t p = 0;
    for (int d = 0; d < W; ++d)
      for (int k : L_.a2a_slots_to[static_cast<size_t>(d)]) {
        const Slot& sl = L_.slots[static_cast<size_t>(k)];
        const int64_t dim = L_.dim[static_cast<size_t>(sl.feature)], cols = sl.s.num_cols;
        float* dst = b.pooled[static_cast<size_t>(sl.feature)].data();
        for (int64_t s = 0; s < B; ++s) std::memcpy(dst + s * dim + sl.s.col_offset, od.a2a_recv.data() + p + static_cast<size_t>(s * cols), sizeof(float) * static_cast<size_t>(cols));
        p += static_cast<size_t>(B * cols);
      }
    auto feature_table = [&](int f) { return sh_.spec.table_of_feature(static_cast<size_t>(f)); };
    p = 0;
    for (int f : L_.rw_features) {
      const int64_t dim = L_.dim[static_cast<size_t>(f)];
      std::memcpy(b.pooled[static_cast<size_t>(f)].data(), od.rw_recv.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
      if (is_mean(feature_table(f))) scale_rows_mean(b, f, b.pooled[static_cast<size_t>(f)].data(), dim);
      p += static_cast<size_t>(B * dim);
    }
    if (node_) {
      p = 0;
      for (int m = 0; m < L_.nodes; ++m)
        for (int f : L_.twrw_features[static_cast<size_t>(m)]) {
          const int64_t dim = L_.dim[static_cast<size_t>(f)];
          std::memcpy(b.pooled[static_cast<size_t>(f)].data(), od.tw_recv.data() + p, sizeof(float) * static_cast<size_t>(B * dim));
          if (is_mean(feature_table(f))) scale_rows_mean(b, f, b.pooled[static_cast<size_t>(f)].data(), dim);
          p += static_cast<size_t>(B * dim);
        }
    }
  }
  od = {};  // the comm buffers go back to the allocator
  if (sh_.opt.on_pooled)
    for (int f = 0; f < F; ++f)
      sh_.opt.on_pooled(me_, b.it, f, b.pooled[static_cast<size_t>(f)].data(), B, L_.dim[static_cast<size_t>(f)]);
}


}  // namespace embedscope::engine::threaded
