#include "experiments/studies.hpp"

namespace kvq::experiments {

const std::vector<std::pair<std::string, StudyFactory>>& study_factories() {
  static const std::vector<std::pair<std::string, StudyFactory>> factories{
      {"qsnr", make_qsnr_study},         {"crest", make_crest_study},   {"scales", make_scales_study},
      {"attention", make_attention_study}, {"errors", make_errors_study}};
  return factories;
}

}  // namespace kvq::experiments
