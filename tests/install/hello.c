/* hello: a program built against an installed termsight (pkg-config or find_package), as a
 * user's would be: a session, ten steps of two operators, the recording's folder printed. */
#include <termsight/termsight.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    termsight_options o;
    termsight_options_init(&o);
    o.output_path = argc > 1 ? argv[1] : "termsight-data";
    termsight_session *s = NULL;
    if (termsight_session_create(&o, &s) != TERMSIGHT_OK) {
        fprintf(stderr, "hello: %s\n", termsight_last_error());
        return 1;
    }
    volatile double x = 0;
    for (int step = 0; step < 10; step++) {
        termsight_step_begin();
        termsight_range_begin("Default/net/MatMul-op1", "MatMul");
        for (int i = 0; i < 100000; i++)
            x += i * 0.5;
        termsight_range_end();
        termsight_range_begin("Default/net/ReLU-op2", "ReLU");
        termsight_range_end();
        termsight_step_end();
    }
    printf("%s\n", termsight_run_folder(s));
    return termsight_session_destroy(s) == TERMSIGHT_OK ? 0 : 1;
}
