// report_internal.h — helpers the report's files share (report.cpp,
// report_svg.cpp, report_findings.cpp); not part of the public interface.
#pragma once
#include <string>

#include <string_view>
#include "training/run_layout.h"

#include "util/json.h"

namespace ppolab::report_detail {

// The mode whose stage reports and rollouts the report draws: the
// uninterrupted run (the interrupted and resumed ones match it bit for bit).
inline constexpr const char* kMode = "continuous";

// Deterministic short number text ("%.4g": 4 significant figures; "—" for non-finite).
std::string num(double v, const char* format = "%.4g");
// A JSON value as cell text (numbers by num, booleans yes/no, null "—"), escaped.
std::string json_cell(const json& v);
// A whole <td>: numbers right-aligned (class "n"), everything else as text.
std::string td(const json& v);
std::string td_num(double v);
std::string td_text(std::string_view escaped_html);
std::string not_run(std::string_view what);
std::string section(std::string_view id, std::string_view title);
bool exists_file(const std::filesystem::path& p);

// The report's sections that live in report_findings.cpp.
std::string render_findings_box(const std::filesystem::path& run);  // first screen; a line when absent
std::string render_overoptimisation(const std::filesystem::path& run);
std::string render_diagnostics(const RunLayout& run);

}  // namespace ppolab::report_detail
