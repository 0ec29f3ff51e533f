// report_svg.cpp — the report's plotting primitives: HTML escaping, nice
// ticks, moving averages and inline SVG plots (lines, markers, interval bars,
// dashed baselines, stacked panels). See report.h.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "evaluation/report.h"
#include "evaluation/report_internal.h"
#include "util/error.h"

namespace ppolab {

using report_detail::num;

std::string html_escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;
            default:
                // control characters (rollouts of an untrained policy hold them) are
                // not valid in HTML text: shown as U+FFFD
                if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += "\xEF\xBF\xBD";
                else out += c;
        }
    }
    return out;
}

std::vector<double> plot_ticks(double lo, double hi, int target_count, bool integers) {
    PPOLAB_ASSERT(target_count >= 2);
    if (!(hi > lo)) return {lo};
    // the smallest 1-2-5 step giving at most target_count intervals
    const double raw = (hi - lo) / target_count;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    double step = mag;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        step = m * mag;
        if (step >= raw) break;
    }
    if (integers) step = std::max(step, 1.0);
    std::vector<double> ticks;
    const double first = std::ceil(lo / step - 1e-9) * step;
    for (double t = first; t <= hi + step * 1e-9; t += step) ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
    return ticks;
}

std::vector<double> moving_average(const std::vector<double>& y, int window) {
    PPOLAB_ASSERT(window >= 1);
    const int64_t half = window / 2, n = static_cast<int64_t>(y.size());
    std::vector<double> out(y.size(), NAN);
    for (int64_t i = 0; i < n; ++i) {
        double sum = 0;
        int64_t count = 0;
        for (int64_t j = std::max<int64_t>(0, i - half); j <= std::min(n - 1, i + half); ++j)
            if (std::isfinite(y[static_cast<size_t>(j)])) {
                sum += y[static_cast<size_t>(j)];
                ++count;
            }
        if (count > 0) out[static_cast<size_t>(i)] = sum / static_cast<double>(count);
    }
    return out;
}

namespace {

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

// The plot area of one panel inside its SVG (panels stack vertically).
struct Frame {
    double top0 = 0;  // y offset of the panel in the SVG
    double W = 720, H = 320, left = 70, right = 230, top = 30, bottom = 50;
    double pw() const { return W - left - right; }
    double ph() const { return H - top - bottom; }
};

struct Range {
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    size_t points = 0;
    bool integer_x = true;  // every x a whole number: no fractional ticks
};

bool finite_point(const PlotSeries& s, size_t i) { return std::isfinite(s.x[i]) && std::isfinite(s.y[i]); }

Range data_range(const PlotSpec& spec) {
    Range r;
    for (const PlotSeries& s : spec.series) {
        PPOLAB_ASSERT(s.x.size() == s.y.size());
        PPOLAB_ASSERT(s.y_low.empty() || s.y_low.size() == s.y.size());
        PPOLAB_ASSERT(s.y_high.empty() || s.y_high.size() == s.y.size());
        for (size_t i = 0; i < s.x.size(); ++i) {
            if (!finite_point(s, i)) continue;
            r.integer_x = r.integer_x && s.x[i] == std::round(s.x[i]);
            r.xmin = std::min(r.xmin, s.x[i]);
            r.xmax = std::max(r.xmax, s.x[i]);
            r.ymin = std::min(r.ymin, s.y[i]);
            r.ymax = std::max(r.ymax, s.y[i]);
            for (const auto* bar : {&s.y_low, &s.y_high})
                if (!bar->empty() && std::isfinite((*bar)[i])) {
                    r.ymin = std::min(r.ymin, (*bar)[i]);
                    r.ymax = std::max(r.ymax, (*bar)[i]);
                }
            ++r.points;
        }
    }
    if (r.points == 0) return r;
    if (spec.x_from_zero) r.xmin = std::min(r.xmin, 0.0);
    if (r.xmax == r.xmin) {
        r.xmin -= 1;
        r.xmax += 1;
    }
    if (std::isfinite(spec.y_min) && std::isfinite(spec.y_max) && spec.y_max > spec.y_min) {
        const double pad = (spec.y_max - spec.y_min) * 0.05;
        r.ymin = std::min(r.ymin, spec.y_min) - pad;
        r.ymax = std::max(r.ymax, spec.y_max) + pad;
    } else if (r.ymax == r.ymin) {
        const double pad = std::max(std::fabs(r.ymin) * 0.1, 1e-3);
        r.ymin -= pad;
        r.ymax += pad;
    } else {
        const double pad = (r.ymax - r.ymin) * 0.05;
        r.ymin -= pad;
        r.ymax += pad;
    }
    return r;
}

std::string axes(const PlotSpec& spec, const Frame& f, const Range& r) {
    const double top = f.top0 + f.top, pw = f.pw(), ph = f.ph();
    auto px = [&](double x) { return f.left + (x - r.xmin) / (r.xmax - r.xmin) * pw; };
    auto py = [&](double y) { return top + ph - (y - r.ymin) / (r.ymax - r.ymin) * ph; };
    std::string s = "<rect x=\"" + num(f.left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
                    num(ph) + "\" fill=\"none\" stroke=\"#444\"/>\n";
    for (double t : plot_ticks(r.xmin, r.xmax, 5, r.integer_x)) {
        const std::string X = num(px(t), "%.2f");
        s += "<line class=\"tick\" x1=\"" + X + "\" x2=\"" + X + "\" y1=\"" + num(top + ph) + "\" y2=\"" +
             num(top + ph + 5) + "\" stroke=\"#444\"/><text x=\"" + X + "\" y=\"" + num(top + ph + 18) +
             "\" text-anchor=\"middle\" font-size=\"11\">" + num(t) + "</text>\n";
    }
    for (double t : plot_ticks(r.ymin, r.ymax)) {
        const std::string Y = num(py(t), "%.2f");
        s += "<line class=\"tick\" x1=\"" + num(f.left - 5) + "\" x2=\"" + num(f.left + pw) + "\" y1=\"" + Y +
             "\" y2=\"" + Y + "\" stroke=\"#ddd\"/><text x=\"" + num(f.left - 8) + "\" y=\"" + Y +
             "\" text-anchor=\"end\" dominant-baseline=\"middle\" font-size=\"11\">" + num(t) + "</text>\n";
    }
    s += "<text x=\"" + num(f.left + pw / 2) + "\" y=\"" + num(f.top0 + f.H - 8) +
         "\" text-anchor=\"middle\" font-size=\"12\">" + html_escape(spec.x_label) + "</text>\n";
    s += "<text transform=\"translate(16 " + num(top + ph / 2) +
         ") rotate(-90)\" text-anchor=\"middle\" font-size=\"12\">" + html_escape(spec.y_label) + "</text>\n";
    return s;
}

std::string draw_series(const PlotSpec& spec, const Frame& f, const Range& r, size_t k) {
    const PlotSeries& ser = spec.series[k];
    const double top = f.top0 + f.top, pw = f.pw(), ph = f.ph();
    auto px = [&](double x) { return f.left + (x - r.xmin) / (r.xmax - r.xmin) * pw; };
    auto py = [&](double y) { return top + ph - (y - r.ymin) / (r.ymax - r.ymin) * ph; };
    const std::string colour =
        ser.colour.empty() ? std::string(kColours[k % (sizeof kColours / sizeof kColours[0])]) : ser.colour;
    using Style = PlotSeries::Style;
    const Style style = ser.style != Style::automatic ? ser.style : spec.scatter ? Style::markers : Style::line;
    const bool markers = style != Style::line || ser.x.size() <= 60;
    const std::string radius = style == Style::line ? "2.5" : "3";
    const std::string opacity = style == Style::faint_markers ? "0.3" : "0.7";
    std::string path, marks, bars;
    size_t shown = 0;
    for (size_t i = 0; i < ser.x.size(); ++i) {
        if (!finite_point(ser, i)) continue;
        const std::string X = num(px(ser.x[i]), "%.2f"), Y = num(py(ser.y[i]), "%.2f");
        path += (shown == 0 ? "" : " ") + X + "," + Y;
        if (markers)
            marks += "<circle cx=\"" + X + "\" cy=\"" + Y + "\" r=\"" + radius + "\" fill=\"" + colour +
                     "\" fill-opacity=\"" + opacity + "\"/>";
        if (!ser.y_low.empty() && std::isfinite(ser.y_low[i]) && std::isfinite(ser.y_high[i])) {
            const std::string lo = num(py(ser.y_low[i]), "%.2f"), hi = num(py(ser.y_high[i]), "%.2f");
            const std::string x0 = num(px(ser.x[i]) - 3, "%.2f"), x1 = num(px(ser.x[i]) + 3, "%.2f");
            bars += "<path class=\"bar\" d=\"M" + X + " " + lo + "V" + hi + "M" + x0 + " " + lo + "H" + x1 + "M" + x0 +
                    " " + hi + "H" + x1 + "\" stroke=\"" + colour + "\" fill=\"none\"/>";
        }
        ++shown;
    }
    std::string s = "<g class=\"series\" data-name=\"" + html_escape(ser.name) + "\">";
    const std::string dash = ser.dashed ? "\" stroke-dasharray=\"6 4" : "";
    if (style == Style::line && shown > 1)
        s += "<polyline fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"1.5" + dash + "\" points=\"" + path +
             "\"/>";
    s += bars + marks + "</g>\n";
    // legend: a line sample for lines (dashed when dashed), a dot for markers
    const double ly = top + 10 + 18 * static_cast<double>(k), lx = f.left + pw + 12;
    s += "<g class=\"legend\">";
    if (style == Style::line)
        s += "<line x1=\"" + num(lx) + "\" x2=\"" + num(lx + 14) + "\" y1=\"" + num(ly) + "\" y2=\"" + num(ly) +
             "\" stroke=\"" + colour + "\" stroke-width=\"2" + dash + "\"/>";
    else
        s += "<circle cx=\"" + num(lx + 7) + "\" cy=\"" + num(ly) + "\" r=\"4\" fill=\"" + colour +
             "\" fill-opacity=\"" + opacity + "\"/>";
    s += "<text x=\"" + num(lx + 18) + "\" y=\"" + num(ly) + "\" dominant-baseline=\"middle\" font-size=\"11\">" +
         html_escape(ser.name) + "</text></g>\n";
    return s;
}

// One panel at f.top0: title, axes, series, legend (or "no data").
std::string panel(const PlotSpec& spec, const Frame& f) {
    std::string s = "<text x=\"" + num(f.left + f.pw() / 2) + "\" y=\"" + num(f.top0 + 18) +
                    "\" text-anchor=\"middle\" font-weight=\"bold\">" + html_escape(spec.title) + "</text>\n";
    const Range r = data_range(spec);
    if (r.points == 0)
        return s + "<text x=\"" + num(f.W / 2) + "\" y=\"" + num(f.top0 + f.H / 2) +
               "\" text-anchor=\"middle\">no data (not run)</text>\n";
    s += axes(spec, f, r);
    for (size_t k = 0; k < spec.series.size(); ++k) s += draw_series(spec, f, r, k);
    return s;
}

std::string svg_open(const std::string& id, double W, double H, const std::string& title) {
    return "<figure>\n<svg id=\"" + id +
           "\" class=\"plot\" xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 " + num(W) + " " +
           num(H) + "\" preserveAspectRatio=\"xMidYMid meet\" role=\"img\">\n<title>" + html_escape(title) +
           "</title>\n";
}

std::string svg_close(std::string_view caption) {
    return "</svg>\n<figcaption>" + html_escape(caption) + "</figcaption>\n</figure>\n";
}

}  // namespace

std::string svg_plot(const PlotSpec& spec, std::string_view caption) {
    const Frame f;
    return svg_open(spec.id, f.W, f.H, spec.title) + panel(spec, f) + svg_close(caption);
}

std::string svg_panels(const std::string& id, const std::string& title, const std::vector<PlotSpec>& panels,
                       std::string_view caption) {
    Frame f;
    std::string s = svg_open(id, f.W, f.H * static_cast<double>(panels.size()), title);
    for (const PlotSpec& p : panels) {
        s += panel(p, f);
        f.top0 += f.H;
    }
    return s + svg_close(caption);
}

}  // namespace ppolab
