/* A correct submission: for each line "a b" of standard input, print a + b. */
#include <stdio.h>

int main(void) {
    long long a, b;
    while (scanf("%lld %lld", &a, &b) == 2) {
        printf("%lld\n", a + b);
    }
    return 0;
}
