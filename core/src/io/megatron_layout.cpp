#include "pipestudio/core/io/megatron_layout.h"

#include <cctype>
#include <string>

namespace ps::core {

namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// One stage's letters, run-length written: "Etttt" -> "Et*4".
std::string compressStage(const std::string& letters) {
  std::string out;
  for (size_t i = 0; i < letters.size();) {
    size_t j = i;
    while (j < letters.size() && letters[j] == letters[i]) ++j;
    out += letters[i];
    if (j - i > 1) out += "*" + std::to_string(j - i);
    i = j;
  }
  return out;
}

// Digits at `pos`, as Megatron's `\d+` takes them.
bool readCount(std::string_view s, size_t& pos, long long& n) {
  size_t start = pos;
  n = 0;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    n = n * 10 + (s[pos] - '0');
    if (n > 1000000) return false;
    ++pos;
  }
  return pos > start;
}

}  // namespace

Result<std::vector<std::string>> expandMegatronLayout(std::string_view layout) {
  auto error = [&](size_t at, const std::string& what) {
    return makeError("megatron.layout",
                     "layout '" + std::string(layout) + "', column " + std::to_string(at + 1) + ": " + what);
  };
  // Commas first (cosmetic), then groups "(...)*n", then letters "x*n", as Megatron does.
  std::string s;
  std::vector<size_t> column;  // each character's place in `layout`, for errors
  for (size_t i = 0; i < layout.size(); ++i)
    if (layout[i] != ',') {
      s += layout[i];
      column.push_back(i);
    }
  std::string grouped;
  std::vector<size_t> groupedColumn;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '(') {
      size_t close = s.find(')', i + 1);
      size_t pos = close == std::string::npos ? close : close + 1;
      long long n = 0;
      if (close != std::string::npos && close > i + 1 && pos < s.size() && s[pos] == '*' &&
          readCount(s, ++pos, n)) {
        for (long long k = 0; k < n; ++k)
          for (size_t j = i + 1; j < close; ++j) {
            grouped += s[j];
            groupedColumn.push_back(column[j]);
          }
        i = pos;
        continue;
      }
    }
    grouped += s[i];
    groupedColumn.push_back(column[i]);
    ++i;
  }
  std::string letters;
  std::vector<size_t> letterColumn;
  for (size_t i = 0; i < grouped.size();) {
    long long n = 0;
    size_t pos = i + 2;
    if (i + 1 < grouped.size() && grouped[i + 1] == '*' && readCount(grouped, pos, n)) {
      letters.append(static_cast<size_t>(n), grouped[i]);
      letterColumn.insert(letterColumn.end(), static_cast<size_t>(n), groupedColumn[i]);
      i = pos;
      continue;
    }
    letters += grouped[i];
    letterColumn.push_back(groupedColumn[i]);
    ++i;
  }
  std::vector<std::string> stages(1);
  for (size_t i = 0; i < letters.size(); ++i) {
    const char c = letters[i];
    if (c == '|') {
      stages.emplace_back();
    } else if (c == 'E' || c == 't' || c == 'm' || c == 'L') {
      stages.back() += c;
    } else {
      return error(letterColumn[i], std::string("'") + c + "' is no layer (E, t, m, L)");
    }
  }
  return stages;
}

Result<MegatronLayout> megatronLayout(const std::vector<int>& layersPerStage, const Pipeline& pipeline,
                                      const std::vector<std::string>& layerNames) {
  const int S = static_cast<int>(layersPerStage.size()), PP = pipeline.devices;
  if (S != pipeline.stages)
    return makeError("megatron.partition", "the partition has " + std::to_string(S) +
                                               " stages, the schedule " + std::to_string(pipeline.stages));
  if (S % PP != 0)
    return makeError("megatron.placement",
                     std::to_string(S) + " stages do not divide over " + std::to_string(PP) +
                         " pipeline ranks (Megatron-LM gives every rank as many virtual "
                         "stages)");
  for (int s = 0; s < S; ++s)
    if (pipeline.deviceOf(s) != s % PP)
      return makeError("megatron.placement",
                       "stage " + std::to_string(s) + " is on device " +
                           std::to_string(pipeline.deviceOf(s)) +
                           "; Megatron-LM runs stage k of the layout on pipeline rank k mod " +
                           std::to_string(PP) + ", so a layout cannot express this " +
                           std::string(placementKindName(pipeline.placementKind)) + " placement");
  int layers = 0;
  for (int n : layersPerStage) {
    if (n < 0) return makeError("megatron.partition", "a stage cannot hold " + std::to_string(n) + " layers");
    layers += n;
  }
  if (layers < 2)
    return makeError("megatron.partition",
                     "the partition holds " + std::to_string(layers) +
                         " layer(s); a layout needs the embedding (first layer) and the loss layer (last)");
  if (!layerNames.empty() && static_cast<int>(layerNames.size()) != layers)
    return makeError("megatron.partition", "the partition holds " + std::to_string(layers) +
                                               " layers, the cost profile " +
                                               std::to_string(layerNames.size()));
  for (const auto& n : layerNames)
    if (startsWith(n, "mamba"))
      return makeError(
          "megatron.hybrid",
          "layer '" + n +
              "' is a Mamba layer: Megatron-LM builds hybrid models from --hybrid-layer-pattern, whose "
              "'|' marks the stages, and refuses --pipeline-model-parallel-layout with it");

  MegatronLayout out;
  out.pipelineParallelSize = PP;
  out.virtualStages = S / PP;
  int layer = 0, mtpStage = -1;
  for (int s = 0; s < S; ++s) {
    std::string letters;
    for (int k = 0; k < layersPerStage[static_cast<size_t>(s)]; ++k, ++layer) {
      char c = 't';
      if (layer == 0)
        c = 'E';
      else if (layer == layers - 1)
        c = 'L';
      else if (!layerNames.empty() && startsWith(layerNames[static_cast<size_t>(layer)], "mtp"))
        c = 'm';
      if (c == 't') {
        if (out.mtpLayers > 0)
          return makeError("megatron.mtp",
                           "decoder layer " + std::to_string(layer) +
                               " comes after a multi-token-prediction layer; Megatron-LM places "
                               "every decoder layer before them");
        ++out.decoderLayers;
      }
      if (c == 'm') {
        if (mtpStage >= 0 && mtpStage != s)
          return makeError("megatron.mtp", "multi-token-prediction layers in stages " +
                                               std::to_string(mtpStage) + " and " + std::to_string(s) +
                                               "; Megatron-LM wants them all in one stage");
        mtpStage = s;
        ++out.mtpLayers;
      }
      letters += c;
    }
    out.stages.push_back(std::move(letters));
  }
  if (mtpStage >= 0 && mtpStage / PP != out.virtualStages - 1)
    return makeError("megatron.mtp", "the multi-token-prediction layers are in stage " +
                                         std::to_string(mtpStage) + ", virtual stage " +
                                         std::to_string(mtpStage / PP) + " of rank " +
                                         std::to_string(mtpStage % PP) +
                                         "; Megatron-LM wants them in a rank's last virtual stage");

  // Stages written run-length; three or more equal stages in a row (never the last) as a group.
  std::vector<std::string> parts;
  for (const auto& st : out.stages) parts.push_back(compressStage(st));
  for (int s = 0; s < S;) {
    int e = s;
    while (e + 1 < S - 1 && parts[static_cast<size_t>(e) + 1] == parts[static_cast<size_t>(s)]) ++e;
    const int run = e - s + 1;
    if (run >= 3 && e < S - 1) {
      out.layout += "(" + parts[static_cast<size_t>(s)] + "|)*" + std::to_string(run) + ",";
    } else {
      for (int k = s; k <= e; ++k) out.layout += parts[static_cast<size_t>(k)] + (k + 1 < S ? "|" : "");
    }
    s = e + 1;
  }
  return out;
}

}  // namespace ps::core
