// pipestudio-cli expand FILE|- [--set name=value]... : expands a programmable .pipe schedule
// (loops, templates, cursors) into its explicit form.
#include "common/command.h"
#include "dsl_print_command.h"

namespace {

const ps::cli::FlagCommandRegistrar kExpand(ps::cli::explicitScheduleCommand(
    "expand", "expand a programmable .pipe schedule into its explicit form",
    "usage: pipestudio-cli expand FILE|- [--set name=value]... [-o OUT]\n\n"
    "Runs the program in FILE (or stdin with -) with the given parameters and prints the\n"
    "explicit schedule it produces. --set overrides a top-level 'let' or the devices, stages\n"
    "and microbatches header lines, e.g. --set devices=8 --set microbatches=32.\n"
    "Exit status: 0 ok, 1 the file has errors (printed as file:line:col), 2 usage.\n"));

}  // namespace
