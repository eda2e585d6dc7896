/* The doctor's two outputs: a report for people and JSON for programs
 * (schema: docs/doctor.schema.json). */
#ifndef FASTCLOCK_CLI_REPORT_H
#define FASTCLOCK_CLI_REPORT_H

#include <stdio.h>

#include "facts.h"
#include "findings.h"

/* The one-line verdict: "problem", "warning"... and a summary sentence. */
void report_verdict(const struct doctor_facts *f, const struct findings *fs, char *summary, size_t size);

void report_text(FILE *out, const struct doctor_facts *f, const struct findings *fs, int colour);
void report_json(FILE *out, const struct doctor_facts *f, const struct findings *fs);

/* Version of the JSON document's layout; bumped on incompatible changes. */
#define DOCTOR_SCHEMA_VERSION 1

#endif
