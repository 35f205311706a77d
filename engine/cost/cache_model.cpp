// The expected cache behaviour of a host_cached shard (cost/cache_model.h).
#include "embedscope/engine/cost/cache_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "embedscope/engine/input/id_share.h"
#include "embedscope/engine/kernels/kernels.h"
#include "embedscope/engine/model/host_cache.h"

namespace embedscope::engine {

namespace {

// Rank groups [lo, hi) of 0-based ranks over R rows: one by one up to 1,024, then ratio 1.02.
std::vector<std::pair<int64_t, int64_t>> rank_groups(int64_t R) {
  std::vector<std::pair<int64_t, int64_t>> g;
  int64_t lo = 0;
  while (lo < R) {
    const int64_t hi = lo < 1024 ? lo + 1 : std::min<int64_t>(R, std::max<int64_t>(lo + 1, static_cast<int64_t>(std::ceil(lo * 1.02))));
    g.emplace_back(lo, std::min(hi, R));
    lo = std::min(hi, R);
  }
  return g;
}

// 1 - (1 - p)^x for p in [0, 1], x >= 0
double one_minus_pow(double p, double x) {
  if (p >= 1.0) return x > 0 ? 1.0 : 0.0;
  return -std::expm1(x * std::log1p(-p));
}

}  // namespace

CacheEstimate estimate_cache(const WorkloadSpec& spec, const TableSpec& t, const Shard& s,
                             const std::vector<std::pair<int, double>>& ids_per_feature, int64_t lookups_before) {
  CacheEstimate e;
  for (const auto& [f, n] : ids_per_feature) {
    if (f < 0 || f >= static_cast<int>(spec.features.size()))
      throw SpecError(fmt::format("estimate_cache: feature {} is not in /features", f));
    e.ids += n;
  }
  const int64_t R = s.num_rows;
  if (R <= 0 || e.ids <= 0 || t.placement == TablePlacement::device) return e;
  const auto groups = rank_groups(R);
  // per group: rows and the share of the shard's ids one row of it takes (rank-aligned mixture)
  std::vector<double> m(groups.size()), p(groups.size(), 0.0);
  for (size_t g = 0; g < groups.size(); ++g) m[g] = static_cast<double>(groups[g].second - groups[g].first);
  for (const auto& [f, n] : ids_per_feature) {
    if (n <= 0) continue;
    const FeatureSpec& fs = spec.features[static_cast<size_t>(f)];
    if (fs.ids.kind == IdDistributionKind::zipf && t.hash_size > 0) {  // Zipf ids hashed into buckets (cache_model.h)
      const double alpha = fs.ids.alpha, Hs = static_cast<double>(t.hash_size);
      const double stride = Hs / static_cast<double>(R);
      const double all = zipf_mass(t.num_embeddings, alpha);
      const double tail = (all - zipf_mass(std::min(t.num_embeddings, t.hash_size), alpha)) / Hs;  // a bucket's share of ranks > Hs
      const double shard = all * static_cast<double>(R) / Hs;  // the shard's expected mass
      auto Z = [&](int64_t k) {  // mass of the ranks 1 .. round(k stride), at most num_embeddings
        return zipf_mass(std::min(t.num_embeddings, static_cast<int64_t>(std::llround(static_cast<double>(k) * stride))), alpha);
      };
      for (size_t g = 0; g < groups.size(); ++g) {
        const double mass = (Z(groups[g].second) - Z(groups[g].first)) / stride + m[g] * tail;
        p[g] += n / e.ids * (mass / shard) / m[g];
      }
      continue;
    }
    const bool zipf = fs.ids.kind == IdDistributionKind::zipf && t.hash_size == 0;
    const int64_t a = zipf && !fs.ids.permute ? s.row_offset : 0;  // the shard's ranks a + 1 .. a + R
    const double total = zipf ? zipf_mass(a + R, fs.ids.alpha) - zipf_mass(a, fs.ids.alpha) : static_cast<double>(R);
    for (size_t g = 0; g < groups.size(); ++g) {
      const double mass = zipf ? zipf_mass(a + groups[g].second, fs.ids.alpha) - zipf_mass(a + groups[g].first, fs.ids.alpha)
                               : m[g];
      p[g] += n / e.ids * (mass / total) / m[g];
    }
  }
  std::vector<double> q(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    q[g] = one_minus_pow(std::min(1.0, p[g]), e.ids);
    e.distinct_rows += m[g] * q[g];
    e.shared_rows += m[g] * q[g] * q[g];  // named by this batch and the one before (independent draws)
  }
  if (t.placement == TablePlacement::host) {
    e.misses = e.evictions = e.distinct_rows;
    return e;
  }
  const auto C = static_cast<double>(cache_slots(t.cache_load_factor, R));
  e.slots = C;
  const bool cold = lookups_before >= 0;
  const auto b = static_cast<double>(std::max<int64_t>(0, lookups_before));
  // a row of this batch hits iff one of the last `window` batches named it (nothing evicted yet)
  auto seen_hits = [&](double window) {
    double h = 0;
    for (size_t g = 0; g < groups.size(); ++g) h += m[g] * q[g] * one_minus_pow(q[g], window);
    return h;
  };
  if (C >= static_cast<double>(R)) {  // every row fits: no miss in the steady state, never full
    e.fill_batches = std::numeric_limits<double>::infinity();
    if (cold) e.misses = std::max(0.0, e.distinct_rows - seen_hits(b));
    return e;  // nothing evicted
  }
  // Che's T (batches): sum m (1 - (1 - q)^T) = C, by bisection; also the fill time from empty
  auto filled = [&](double T) {
    double sum = 0;
    for (size_t g = 0; g < groups.size(); ++g) sum += m[g] * one_minus_pow(q[g], T);
    return sum;
  };
  double lo = 0, hi = 1;
  while (filled(hi) < C && hi < 1e18) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (filled(mid) < C ? lo : hi) = mid;
  }
  const double T = 0.5 * (lo + hi);
  e.fill_batches = T;
  double hits = 0;
  if (cold && b < T) {  // the fill phase, either policy
    hits = seen_hits(b);
  } else if (t.cache_policy == CachePolicy::lfu) {  // the C most named rows (groups are in falling p)
    double left = C;
    for (size_t g = 0; g < groups.size() && left > 0; ++g) {
      const double take = std::min(left, m[g]);
      hits += take * q[g];
      left -= take;
    }
  } else {  // Che: a row hits when one of the last T batches named it
    hits = seen_hits(T);
  }
  e.misses = std::max(0.0, e.distinct_rows - hits);
  // the misses that find a slot: the batch's hits are locked, so at most C - hits of them; lfu's
  // steady top-C set keeps every miss out (each is rarer than every cached row). The others are
  // read for the lookup only, and again by the update (not_inserted).
  const bool filling = cold && b < T;
  const bool lfu_steady = t.cache_policy == CachePolicy::lfu && !filling;
  const double inserted = lfu_steady ? 0.0 : std::clamp(C - (e.distinct_rows - e.misses), 0.0, e.misses);
  e.not_inserted = e.misses - inserted;
  e.evictions = filling ? std::clamp(filled(b) + inserted - C, 0.0, inserted) : inserted;
  return e;
}

HostTraffic host_traffic(const TableSpec& t, OptimizerType opt, int64_t cols, const CacheEstimate& e, bool prefetched) {
  HostTraffic h;
  if (t.placement == TablePlacement::device) return h;
  const double row = 4.0 * static_cast<double>(cols);
  const double state = static_cast<double>(optimizer_state_bytes(opt, 1, cols));
  double uncached = e.not_inserted;  // host_cached: rows the update reads and writes back in place
  if (prefetched && t.placement == TablePlacement::host_cached) {  // room for two batches (cache_model.h)
    // locked: the batch in flight's U rows; pinned: the prefetched batch's cached rows not among
    // them (its hits, U - misses, less the rows both batches name)
    const double hits = e.distinct_rows - e.misses;
    const double p = std::clamp(e.slots - e.distinct_rows - (hits - std::min(e.shared_rows, hits)), 0.0, e.misses);
    h.prefetch_h2d = p * row;
    h.lookup_h2d = (e.misses - p) * row;
    uncached = std::min(uncached, e.misses - p);  // the prefetched rows are in the cache
  } else {
    (prefetched ? h.prefetch_h2d : h.lookup_h2d) = e.misses * row;
  }
  const bool host = t.placement == TablePlacement::host;
  h.update_h2d = e.distinct_rows * state + (host ? e.distinct_rows : uncached) * row;
  h.update_d2h = e.distinct_rows * state + (host ? e.distinct_rows : e.evictions + uncached) * row;
  return h;
}

double shard_distinct_rows(const WorkloadSpec& spec, const TableSpec& t, const Shard& s,
                           const std::vector<std::pair<int, double>>& ids_per_feature) {
  TableSpec anywhere = t;  // the distinct rows do not depend on where the rows live
  anywhere.placement = TablePlacement::host;
  return estimate_cache(spec, anywhere, s, ids_per_feature).distinct_rows;
}

}  // namespace embedscope::engine
