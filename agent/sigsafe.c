/*  =========================================================================
    sigsafe - text for a child between its start and execve
    =========================================================================
*/
#include "sigsafe.h"

#include <stdbool.h>

const char *
sigsafe_decimal (long long value, char *buf)
{
    char digits [24];
    int count = 0;
    bool negative = value < 0;
    unsigned long long magnitude = negative
                                 ? 0ULL - (unsigned long long) value
                                 : (unsigned long long) value;
    do {
        digits [count++] = (char) ('0' + magnitude % 10);
        magnitude /= 10;
    } while (magnitude && count < 22);
    int used = 0;
    if (negative)
        buf [used++] = '-';
    while (count)
        buf [used++] = digits [--count];
    buf [used] = 0;
    return buf;
}
