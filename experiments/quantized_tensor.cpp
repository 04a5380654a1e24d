#include "experiments/quantized_tensor.hpp"

#include <cmath>
#include <stdexcept>

#include "experiments/study_runner.hpp"
#include "kernels/device_copy.hpp"
#include "formats/names.hpp"

namespace kvq::experiments {

std::uint8_t QuantizedTensor::code(std::int64_t k) const {
  return kernels::code_at(shape, codes.data() + (k / shape.cols) * shape.code_bytes_per_row(), k % shape.cols);
}

std::uint8_t QuantizedTensor::scale_code(std::int64_t k) const {
  return shape.scales_per_row() ? scales[(k / shape.cols) * shape.scales_per_row() + (k % shape.cols) / shape.block()] : 0;
}

double QuantizedTensor::decode_scale(std::int64_t k) const {
  const std::uint8_t s = scale_code(k);
  switch (shape.recipe.scale) {
    case BlockScale::e4m3_two_level: return static_cast<double>(e4m3_value_fast(s)) * g;
    case BlockScale::e8m0_pow2: return std::ldexp(1.0, static_cast<int>(s) - 127);
    case BlockScale::tensor_only: return g;
  }
  return 0;
}

bool QuantizedTensor::clipped(std::int64_t k, float x) const {
  const Format f = format_of(shape.recipe.element);
  return (code(k) & f.magnitude_mask()) == f.max_finite_code() &&
         std::fabs(static_cast<double>(x)) > std::fabs(static_cast<double>(values[k]));
}

namespace {

// The same three steps on the GPU: amax, quantize, dequantize (outputs guarded against overruns).
std::string quantize_on_device(const std::vector<float>& x, QuantizedTensor* q) {
  using kernels::DeviceCopy;
  const std::size_t n = x.size();
  const DeviceCopy dx(x.data(), n * sizeof(float), false), damax(nullptr, sizeof(float), true);
  const DeviceCopy dc(nullptr, q->codes.size(), true), ds(nullptr, q->scales.size(), true);
  const DeviceCopy dy(nullptr, n * sizeof(float), true);
  for (const DeviceCopy* b : {&dx, &damax, &dc, &ds, &dy})
    if (!b->error.ok()) return b->error.message();
  float amax = 0;
  Status e = kernels::device::amax(kernels::DType::fp32, dx.p, static_cast<std::int64_t>(n),
                                        static_cast<float*>(damax.p), nullptr);
  if (e.ok()) e = kernels::device::synchronize();
  if (e.ok()) e = damax.fetch(&amax, "amax");
  if (!e.ok()) return e.message();
  q->g = tensor_scale(q->shape.recipe, amax);
  e = kernels::device::quantize(q->shape, kernels::DType::fp32, dx.p, q->g, dc.bytes_ptr(), ds.bytes_ptr(), nullptr);
  if (e.ok())
    e = kernels::device::dequantize(q->shape, dc.bytes_ptr(), ds.bytes_ptr(), q->g, kernels::DType::fp32, dy.p, nullptr);
  if (e.ok()) e = kernels::device::synchronize();
  if (e.ok()) e = dc.fetch(q->codes.data(), "codes");
  if (e.ok()) e = ds.fetch(q->scales.data(), "scales");
  if (e.ok()) e = dy.fetch(q->values.data(), "values");
  return e.message();
}

}  // namespace

QuantizedTensor quantize_tensor(const Recipe& r, const std::vector<float>& x, std::int64_t rows, int cols,
                                bool on_device) {
  QuantizedTensor q;
  q.shape = kernels::QuantizeShape{r, rows, cols};
  q.codes.resize(q.shape.code_bytes());
  q.scales.resize(q.shape.scale_bytes());
  q.values.resize(x.size());
  Status e = kernels::validate(q.shape);
  if (e.ok() && on_device) {
    e = quantize_on_device(x, &q);
  } else if (e.ok()) {
    q.g = tensor_scale(r, kernels::amax_cpu(kernels::DType::fp32, x.data(), static_cast<std::int64_t>(x.size())));
    e = kernels::quantize_cpu(q.shape, kernels::DType::fp32, x.data(), q.g, q.codes.data(), q.scales.data());
    if (e.ok())
      e = kernels::dequantize_cpu(q.shape, q.codes.data(), q.scales.data(), q.g, kernels::DType::fp32, q.values.data());
  }
  if (!e.ok()) throw std::runtime_error(e.message());
  return q;
}

std::string recipes_from_names(const std::vector<std::string>& names, std::vector<NamedRecipe>* out) {
  if (names.empty()) {
    out->assign(kRecipes.begin(), kRecipes.end());
    return {};
  }
  for (const std::string& name : names) {
    const auto r = recipe_from_name(name);
    if (!r) return "--recipes: unknown recipe '" + name + "' (see kvq recipes)";
    out->push_back(*r);
  }
  return {};
}

std::string recipes_manifest(const std::vector<NamedRecipe>& recipes) {
  std::string s = "  \"recipes\": [\n";
  for (std::size_t i = 0; i < recipes.size(); ++i)
    s += "    {\"name\": " + json_quoted(recipes[i].name) + ", \"element\": " + json_quoted(name_of(recipes[i].recipe.element)) +
         ", \"default_block\": " + std::to_string(recipes[i].recipe.block) + ", \"scales\": " +
         json_quoted(recipes[i].scales) + "}" + (i + 1 < recipes.size() ? ",\n" : "\n");
  return s + "  ],\n";
}

}  // namespace kvq::experiments
