#include <algorithm>
#include <sstream>
#include <vector>

#include "kernels/rope_append.hpp"

namespace kvq::kernels {

const char* name_of(RopeStyle s) { return s == RopeStyle::neox ? "neox" : "gptj"; }
const char* name_of(KvLayout l) { return l == KvLayout::nhd ? "nhd" : "hnd"; }
const char* name_of(Attention a) { return a == Attention::mha ? "mha" : "mla"; }

Status validate(const RopeShape& s) {
  std::ostringstream os;
  if (s.attention != Attention::mha && s.attention != Attention::mla) {
    os << "attention must be mha or mla";
  } else if (s.input != DType::fp32 && s.input != DType::bf16 && s.input != DType::fp16) {
    os << "input dtype must be fp32, bf16 or fp16";
  } else if (s.style != RopeStyle::neox && s.style != RopeStyle::gptj) {
    os << "style must be neox or gptj";
  } else if (s.layout != KvLayout::nhd && s.layout != KvLayout::hnd) {
    os << "kv_layout must be nhd or hnd";
  } else if (s.tokens < 0) {
    os << "tokens (nnz) must be >= 0, got " << s.tokens;
  } else if (s.batch < 0) {
    os << "batch (requests; kv_indptr has batch + 1 entries) must be >= 0, got " << s.batch;
  } else if (s.q_heads <= 0) {
    os << "q_heads must be > 0, got " << s.q_heads;
  } else if (s.kv_heads <= 0 || (s.mla() && s.kv_heads != 1)) {
    os << "kv_heads must be " << (s.mla() ? "1 for MLA" : "> 0") << ", got " << s.kv_heads;
  } else if (s.rope_dim <= 0 || s.rope_dim % 2 != 0) {
    os << "rope_dim (rotary dimension) must be even and > 0, got " << s.rope_dim;
  } else if (s.rope_dim > s.head_dim) {
    os << "rope_dim (rotary dimension) = " << s.rope_dim << " is larger than head_dim = " << s.head_dim;
  } else if (s.max_pos <= 0) {
    os << "max_pos (cos_sin_cache rows) must be > 0, got " << s.max_pos;
  } else if (s.page_size <= 0) {
    os << "page_size must be > 0, got " << s.page_size;
  } else if (s.num_pages < 0 || s.num_page_indices < 0) {
    os << "num_pages and num_page_indices (kv_indices entries) must be >= 0";
  }
  return os.str();
}

Status validate(const RopeShape& s, const RopeInputs& in) {
  std::ostringstream os;
  if (auto e = validate(s); !e.ok()) {
    return e;
  } else if (in.quant_scale_q != in.quant_scale_q) {
    os << "quant_scale_q must not be NaN";
  } else if (in.quant_scale_kv != in.quant_scale_kv) {
    os << "quant_scale_kv must not be NaN";
  } else if (s.tokens > 0 && (in.q_rope == nullptr || in.k_rope == nullptr)) {
    os << (in.q_rope == nullptr ? "q_rope" : "k_rope") << " must not be null";
  } else if (s.tokens > 0 && s.nope_dim() > 0 && (in.q_nope == nullptr || in.k_nope == nullptr)) {
    os << (in.q_nope == nullptr ? "q_nope" : "k_nope") << " must not be null when nope_dim = " << s.nope_dim();
  } else if (s.tokens > 0 && !s.mla() && in.v == nullptr) {
    os << "v must not be null for MHA";
  } else if (s.tokens > 0 && (in.cos_sin_cache == nullptr || in.pos_ids == nullptr)) {
    os << (in.cos_sin_cache == nullptr ? "cos_sin_cache" : "pos_ids") << " must not be null";
  }
  return os.str();
}

Status validate_buffers(const RopeShape& s, const KvBuffers& b, std::int64_t slots, const char* what) {
  if (slots == 0) return {};
  if (s.mla() && (b.ckv == nullptr || b.kpe == nullptr))
    return std::string(what) + (b.ckv == nullptr ? " ckv" : " kpe") + " must not be null for MLA";
  if (!s.mla() && (b.k == nullptr || b.v == nullptr))
    return std::string(what) + (b.k == nullptr ? " k" : " v") + " must not be null for MHA";
  return {};
}

Status validate_q(const RopeShape& s, const QOutputs& q) {
  if (s.tokens > 0 && q.q_rope == nullptr) return "q_rope_out must not be null";
  if (s.tokens > 0 && s.nope_dim() > 0 && q.q_nope == nullptr) return "q_nope_out must not be null";
  return {};
}

Status validate_table(const RopeShape& s, const PageTable& t) {
  if (s.tokens > 0 && (t.batch_indices == nullptr || t.positions == nullptr))
    return t.batch_indices == nullptr ? "batch_indices must not be null" : "positions must not be null";
  if (t.kv_indptr == nullptr) return "kv_indptr must not be null";
  if (s.num_page_indices > 0 && t.kv_indices == nullptr) return "kv_indices must not be null";
  return {};
}

namespace {

// Every token's groups, in order, with the kernels' choice of whole-group code.
void rope_twin(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& out, const PageTable& t,
               bool paged) {
  const RopeParts p = rope_parts(s, paged);
  const bool whole = rope_groups_whole(s, in, q, out);
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    if (whole) {
      rope_token_work<true>(s, p, in, q, out, t, paged, i, 0, 1);
    } else {
      rope_token_work<false>(s, p, in, q, out, t, paged, i, 0, 1);
    }
  }
}

}  // namespace

Status validate_indices(const RopeShape& s, const std::int32_t* pos_ids, const PageTable& t) {
  std::ostringstream os;
  if (auto e = validate_table(s, t); !e.ok()) return e;
  if (t.kv_indptr[0] != 0) {
    os << "kv_indptr[0] must be 0, got " << t.kv_indptr[0];
    return os.str();
  }
  for (std::int64_t b = 0; b < s.batch; ++b) {
    if (t.kv_indptr[b + 1] < t.kv_indptr[b]) {
      os << "kv_indptr must be non-decreasing: kv_indptr[" << b + 1 << "] = " << t.kv_indptr[b + 1] << " < kv_indptr["
         << b << "] = " << t.kv_indptr[b];
      return os.str();
    }
  }
  if (t.kv_indptr[s.batch] != s.num_page_indices) {
    os << "kv_indptr[batch] = " << t.kv_indptr[s.batch] << " must equal the length of kv_indices ("
       << s.num_page_indices << ")";
    return os.str();
  }
  for (std::int64_t k = 0; k < s.num_page_indices; ++k) {
    if (t.kv_indices[k] < 0 || t.kv_indices[k] >= s.num_pages) {
      os << "kv_indices[" << k << "] = " << t.kv_indices[k] << " is not a page of the cache (num_pages = " << s.num_pages
         << ")";
      return os.str();
    }
  }
  std::vector<std::int64_t> slots;  // page * page_size + entry of every written token
  std::vector<std::int64_t> owners;
  for (std::int64_t i = 0; i < s.tokens; ++i) {
    const std::int32_t b = t.batch_indices[i];
    if (b < 0) continue;  // padding
    if (b >= s.batch) {
      os << "batch_indices[" << i << "] = " << b << " is not a request (batch = " << s.batch << ")";
      return os.str();
    }
    if (pos_ids != nullptr && (pos_ids[i] < 0 || pos_ids[i] >= s.max_pos)) {
      os << "pos_ids[" << i << "] = " << pos_ids[i] << " is not a row of cos_sin_cache (max_pos = " << s.max_pos << ")";
      return os.str();
    }
    const std::int64_t pages = t.kv_indptr[b + 1] - t.kv_indptr[b];
    if (t.positions[i] < 0 || t.positions[i] >= pages * s.page_size) {
      os << "positions[" << i << "] = " << t.positions[i] << " is beyond request " << b << "'s pages (" << pages
         << " pages of " << s.page_size << ")";
      return os.str();
    }
    std::int64_t page = 0, entry = 0;
    token_slot(s, t, i, &page, &entry);
    slots.push_back(page * s.page_size + entry);
    owners.push_back(i);
  }
  std::vector<std::size_t> order(slots.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return slots[a] < slots[b]; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    if (slots[order[k]] == slots[order[k - 1]]) {
      const std::int64_t slot = slots[order[k]];
      os << "positions: tokens " << std::min(owners[order[k - 1]], owners[order[k]]) << " and "
         << std::max(owners[order[k - 1]], owners[order[k]]) << " write the same slot (page " << slot / s.page_size
         << ", entry " << slot % s.page_size << ")";
      return os.str();
    }
  }
  return {};
}

Status rope_append_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& cache,
                       const PageTable& t) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.ok()) e = validate_indices(s, in.pos_ids, t);
  if (!e.ok()) return e;
  rope_twin(s, in, q, cache, t, true);
  return {};
}

Status rope_quantize_cpu(const RopeShape& s, const RopeInputs& in, const QOutputs& q, const KvBuffers& contiguous,
                         const std::int32_t* batch_indices) {
  Status e = validate(s, in);
  if (e.ok()) e = validate_q(s, q);
  if (e.ok()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  for (std::int64_t i = 0; i < s.tokens && e.ok(); ++i) {
    if (batch_indices != nullptr && batch_indices[i] < 0) continue;
    if (in.pos_ids[i] < 0 || in.pos_ids[i] >= s.max_pos)
      e = "pos_ids[" + std::to_string(i) + "] = " + std::to_string(in.pos_ids[i]) +
          " is not a row of cos_sin_cache (max_pos = " + std::to_string(s.max_pos) + ")";
  }
  if (!e.ok()) return e;
  PageTable t;
  t.batch_indices = batch_indices;
  rope_twin(s, in, q, contiguous, t, false);
  return {};
}

Status append_paged_cpu(const RopeShape& s, const KvBuffers& contiguous, const KvBuffers& cache,
                        const PageTable& t) {
  Status e = validate(s);
  if (e.ok()) e = validate_buffers(s, contiguous, s.tokens, "contiguous");
  if (e.ok()) e = validate_buffers(s, cache, s.cache_slots(), "cache");
  if (e.ok()) e = validate_indices(s, nullptr, t);
  if (!e.ok()) return e;
  const RopeParts p = append_parts(s);
  for (std::int64_t i = 0; i < s.tokens; ++i) append_token_work(s, p, contiguous, cache, t, i, 0, 1);
  return {};
}

}  // namespace kvq::kernels
