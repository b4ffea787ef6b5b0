/* model: operator names (opname.c). */
#ifndef TERMSIGHT_MODEL_OPNAME_H
#define TERMSIGHT_MODEL_OPNAME_H

#include <stdint.h>

/* The length of an op's key within name[0..len): PyTorch's NVTX names append fields
 * (", seq = N", ", op_id = N", ", sizes = [[...]]", ", input_op_ids = [...]"), and the key is the
 * name cut where the first of them starts (never cut to nothing); else len. */
uint32_t opname_key_length(const char *name, uint32_t len);

/* 1 when the name is a data fetch's (get_next, GetNext, data fetch, DataLoader, next batch;
 * letters and digits compared without case): a wait for data, never an operator to optimize. */
int opname_is_fetch(const char *name, uint32_t len);

/* 1 when the type is the program's own labels' (termsight.torch gives torch.profiler's
 * record_function blocks the type "record_function"): a label, never an operator type. */
int opname_is_label(const char *type, uint32_t len);

#endif
