#include "sfb/models/registry.h"

#include <fmt/ranges.h>

#include "sfb/core/error.h"
#include "sfb/models/config_model_context.h"
#include "sfb/models/dml.h"
#include "sfb/models/l2mlr.h"
#include "sfb/models/mlr.h"
#include "sfb/models/sparse_coding.h"

namespace sfb::models {

const std::vector<BuiltinModel>& builtin_models() {
  static const std::vector<BuiltinModel> models = {
      {"mlr", [](const api::ModelContext& c) -> api::Model* { return new Mlr(c); }},
      {"l2mlr", [](const api::ModelContext& c) -> api::Model* { return new L2Mlr(c); }},
      {"dml", [](const api::ModelContext& c) -> api::Model* { return new Dml(c); }},
      {"sparse_coding", [](const api::ModelContext& c) -> api::Model* { return new SparseCoding(c); }},
  };
  return models;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : builtin_models()) names.push_back(m.name);
  return names;
}

ModelPtr make_model(const std::string& name, const api::ModelContext& ctx) {
  for (const auto& m : builtin_models())
    if (m.name == name) return ModelPtr(m.create(ctx));
  throw InvalidArgument(
      fmt::format("model.name: unknown model \"{}\"; built-in models are: {}", name, fmt::join(model_names(), ", ")));
}

ModelPtr make_model(const Config& cfg, const io::Dataset& train, int64_t train_total, int rank, int ranks) {
  ConfigModelContext ctx(cfg, train, train_total, rank, ranks);
  ModelPtr m = cfg.model.plugin.empty() ? make_model(cfg.model.name, ctx) : load_plugin(cfg.model.plugin, ctx);
  ctx.check_all_params_read(cfg.model.plugin.empty() ? cfg.model.name : cfg.model.plugin);
  SFB_CHECK(!train.sparse || m->reads_sparse_rows(),
            "model \"{}\"{} reads dense rows only (reads_sparse_rows() is false), but data.format = \"{}\" gives "
            "sparse rows (MiniBatch::x_csr, Dataset::csr; MiniBatch::x is empty): make compute_sf(), objective() and "
            "accuracy() read the CSR rows when batch.sparse / data.sparse and return true from reads_sparse_rows(), "
            "or give the model dense data",
            m->name(), cfg.model.plugin.empty() ? "" : fmt::format(" ({})", cfg.model.plugin), cfg.data.format);
  SFB_CHECK(m->rows() > 0 && m->cols() > 0 && m->rows() < (int64_t{1} << 31) && m->cols() < (int64_t{1} << 31),
            "model \"{}\" declares a {} x {} parameter matrix; both sides must be in [1, 2^31)", m->name(), m->rows(),
            m->cols());
  return m;
}

}  // namespace sfb::models
