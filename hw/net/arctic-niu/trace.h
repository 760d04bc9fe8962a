#include "trace/trace-hw_net_arctic_niu.h"
