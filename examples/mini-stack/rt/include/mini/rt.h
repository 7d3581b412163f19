/* MiniRT: the runtime of the mini stack. */
#ifndef MINI_RT_H
#define MINI_RT_H

#if defined(MINIRT_BUILDING)
#define MINIRT_API __attribute__((visibility("default")))
#else
#define MINIRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Comma list of the compiled-in backends, in the order cpu,nvidia,moore,thead ("cpu", "cpu,nvidia", ...). */
MINIRT_API const char *minirt_backends(void);

/* Devices of the accelerator backend when one is compiled in (0 when its driver or device is missing),
   otherwise 1 for the CPU backend, otherwise 0. */
MINIRT_API int minirt_device_count(void);

#ifdef __cplusplus
}
#endif

#endif /* MINI_RT_H */
