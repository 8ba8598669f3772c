/* stdfds.c - descriptors 0-2 always open (see sf/stdfds.h). */
#include "sf/stdfds.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

int sf_std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int n = open("/dev/null", O_RDWR);
        if (n != fd) { /* the lowest free number: fd, unless open failed */
            if (n >= 0)
                close(n);
            return -1;
        }
    }
    return 0;
}
