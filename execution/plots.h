/* Plots (docs/plots.md): a python tool with output.plots runs its code through a small
 * runner that makes matplotlib save every figure as PNG in /workspace/.toolcage/outputs; the
 * server collects them and returns them as the execution's "outputs". */
#pragma once

#define TC_PLOTS_DIR         ".toolcage" /* in /workspace */
#define TC_PLOTS_RUNNER      ".toolcage/toolcage_plots.py"
#define TC_PLOTS_PATTERN     ".toolcage/outputs/fig-*.png"
#define TC_PLOTS_OUTPUTS_DIR ".toolcage/outputs/"

extern const char tc_plots_runner[];
