/* Addresses in the broker's words. The decision on one address (the deny
 * cidr rules and the address guard) is guard_addr_check (policy/guard.h),
 * the one the proxy applies too. */
#ifndef AIRLOCK_BROKER_DECIDE_H
#define AIRLOCK_BROKER_DECIDE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* inet_ntop of sa into out, "?" when it is neither family. */
void broker_addr_str(const struct sockaddr *sa, char *out, size_t outlen);

#endif
