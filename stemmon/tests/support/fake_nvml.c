/* A fake NVML (libnvidia-ml.so.1) for stemmon's GPU tests and bench.
 *
 * It implements exactly the entry points stemmon's GPU source calls through
 * nvml-wrapper: nvmlInit_v2, nvmlShutdown, nvmlSystemGetDriverVersion,
 * nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetName,
 * nvmlDeviceGetUUID, nvmlDeviceGetMemoryInfo_v2,
 * nvmlDeviceGetComputeRunningProcesses_v3 and nvmlDeviceGetGraphicsRunningProcesses_v3
 * (left out when built with -DFAKE_NVML_WITHOUT_GRAPHICS, an older driver's library).
 *
 * What it serves is read from the file `fake-nvml-state` beside the library itself
 * (found with dladdr), so each copy of the library in its own directory is a driver of
 * its own. The file is read again whenever it is replaced (its inode, size or mtime
 * changed): a test changes the GPUs mid-run by writing a new file and renaming it over
 * the old one. One statement a line, the device ones applying to the last `device`:
 *
 *   driver 550.54.15              the driver version
 *   init_error DRIVER_NOT_LOADED  nvmlInit_v2 fails with this code
 *   count_error UNKNOWN           nvmlDeviceGetCount_v2 fails with this code
 *   log                           append "<function> <device index>" to fake-nvml-calls
 *                                 at every device call
 *   device                        a new device (index 0, 1, ...)
 *   name NVIDIA Fake H100         its name (the rest of the line)
 *   uuid GPU-0000                 its UUID
 *   total 85899345920             its memory, in bytes
 *   used 1073741824               its used memory, in bytes, or `na` (not available)
 *   compute PID USED [GI CI]      a compute process: USED in bytes or `na`, and its MIG
 *   graphics PID USED [GI CI]     instance ids (none: 0xFFFFFFFF); a graphics process
 *   error CALL CODE               CALL (handle, name, uuid, memory, compute, graphics)
 *                                 fails with CODE
 *   lost                          every call on the device fails with GPU_IS_LOST
 *
 * And what a hostile or broken driver does (the hostile tests):
 *
 *   init_sleep MS                 nvmlInit_v2 sleeps MS milliseconds first
 *   read_sleep MS                 every device call sleeps MS milliseconds first
 *   crash init                    nvmlInit_v2 dies of SIGSEGV
 *   crash read                    every device call dies of SIGSEGV
 *   claim_devices N               nvmlDeviceGetCount_v2 claims N devices (only the
 *                                 ones declared answer)
 *   claim_processes N             the process lists claim N entries: a buffer smaller
 *                                 than N gets INSUFFICIENT_SIZE and N
 *
 * CODE is an NVML return code's name without NVML_ERROR_: NO_PERMISSION,
 * NOT_SUPPORTED, GPU_IS_LOST, DRIVER_NOT_LOADED, UNKNOWN, ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

typedef int nvmlReturn_t;
typedef struct fake_device *nvmlDevice_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

enum {
    SUCCESS = 0,
    INVALID_ARGUMENT = 2,
    INSUFFICIENT_SIZE = 7,
    GPU_IS_LOST = 15,
    ARGUMENT_VERSION_MISMATCH = 25,
};

#define NOT_AVAILABLE 0xFFFFFFFFFFFFFFFFULL
#define NO_ID 0xFFFFFFFFu
#define MAX_DEVICES 8
#define MAX_PROCESSES 64

enum call { CALL_HANDLE, CALL_NAME, CALL_UUID, CALL_MEMORY, CALL_COMPUTE, CALL_GRAPHICS, CALLS };
static const char *const call_names[CALLS] = {"handle", "name", "uuid", "memory", "compute", "graphics"};

struct fake_device {
    char name[96];
    char uuid[96];
    unsigned long long total;
    unsigned long long used;
    int lost;
    int error[CALLS];
    int compute_count;
    int graphics_count;
    nvmlProcessInfo_t compute[MAX_PROCESSES];
    nvmlProcessInfo_t graphics[MAX_PROCESSES];
};

static struct {
    char driver[80];
    int init_error;
    int count_error;
    int log;
    long init_sleep_ms;
    long read_sleep_ms;
    int crash_init;
    int crash_read;
    unsigned long long claim_devices;
    unsigned long long claim_processes;
    int device_count;
    struct fake_device devices[MAX_DEVICES];
} state;

/* Handles stay valid across reloads: a handle is its slot, the state behind it changes. */
static struct fake_device *const handles = state.devices;
static char state_path[4096];
static char log_path[4096];
static struct stat loaded;

static const struct {
    const char *name;
    int code;
} codes[] = {
    {"UNINITIALIZED", 1},      {"INVALID_ARGUMENT", 2},  {"NOT_SUPPORTED", 3},
    {"NO_PERMISSION", 4},      {"NOT_FOUND", 6},         {"INSUFFICIENT_SIZE", 7},
    {"INSUFFICIENT_POWER", 8}, {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10},
    {"IRQ_ISSUE", 11},         {"GPU_IS_LOST", 15},      {"RESET_REQUIRED", 16},
    {"OPERATING_SYSTEM", 17},  {"LIB_RM_VERSION_MISMATCH", 18},
    {"UNKNOWN", 999},
};

static int code_of(const char *name) {
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        if (strcmp(codes[i].name, name) == 0) {
            return codes[i].code;
        }
    }
    return 999;
}

static unsigned long long bytes_of(const char *text) {
    return strcmp(text, "na") == 0 ? NOT_AVAILABLE : strtoull(text, NULL, 10);
}

static void locate(void) {
    Dl_info info;
    if (state_path[0] != '\0' || dladdr((void *)locate, &info) == 0 || info.dli_fname == NULL) {
        return;
    }
    const char *slash = strrchr(info.dli_fname, '/');
    int dir = slash == NULL ? 1 : (int)(slash - info.dli_fname);
    const char *base = slash == NULL ? "." : info.dli_fname;
    snprintf(state_path, sizeof state_path, "%.*s/fake-nvml-state", dir, base);
    snprintf(log_path, sizeof log_path, "%.*s/fake-nvml-calls", dir, base);
}

static void add_process(struct fake_device *device, int graphics, const char *rest) {
    char used[32] = "";
    unsigned int pid = 0, gi = NO_ID, ci = NO_ID;
    if (sscanf(rest, "%u %31s %u %u", &pid, used, &gi, &ci) < 2) {
        return;
    }
    int *count = graphics ? &device->graphics_count : &device->compute_count;
    nvmlProcessInfo_t *list = graphics ? device->graphics : device->compute;
    if (*count < MAX_PROCESSES) {
        list[*count] = (nvmlProcessInfo_t){pid, bytes_of(used), gi, ci};
        *count += 1;
    }
}

static void parse(FILE *file) {
    char line[512];
    memset(&state, 0, sizeof state);
    struct fake_device *device = NULL;
    while (fgets(line, sizeof line, file) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *rest = strchr(line, ' ');
        if (rest != NULL) {
            *rest++ = '\0';
        } else {
            rest = line + strlen(line);
        }
        if (strcmp(line, "driver") == 0) {
            snprintf(state.driver, sizeof state.driver, "%s", rest);
        } else if (strcmp(line, "init_error") == 0) {
            state.init_error = code_of(rest);
        } else if (strcmp(line, "count_error") == 0) {
            state.count_error = code_of(rest);
        } else if (strcmp(line, "log") == 0) {
            state.log = 1;
        } else if (strcmp(line, "init_sleep") == 0) {
            state.init_sleep_ms = strtol(rest, NULL, 10);
        } else if (strcmp(line, "read_sleep") == 0) {
            state.read_sleep_ms = strtol(rest, NULL, 10);
        } else if (strcmp(line, "crash") == 0) {
            state.crash_init |= strcmp(rest, "init") == 0;
            state.crash_read |= strcmp(rest, "read") == 0;
        } else if (strcmp(line, "claim_devices") == 0) {
            state.claim_devices = strtoull(rest, NULL, 10);
        } else if (strcmp(line, "claim_processes") == 0) {
            state.claim_processes = strtoull(rest, NULL, 10);
        } else if (strcmp(line, "device") == 0) {
            device = state.device_count < MAX_DEVICES ? &state.devices[state.device_count++] : NULL;
        } else if (device == NULL) {
            continue;
        } else if (strcmp(line, "name") == 0) {
            snprintf(device->name, sizeof device->name, "%s", rest);
        } else if (strcmp(line, "uuid") == 0) {
            snprintf(device->uuid, sizeof device->uuid, "%s", rest);
        } else if (strcmp(line, "total") == 0) {
            device->total = bytes_of(rest);
        } else if (strcmp(line, "used") == 0) {
            device->used = bytes_of(rest);
        } else if (strcmp(line, "compute") == 0) {
            add_process(device, 0, rest);
        } else if (strcmp(line, "graphics") == 0) {
            add_process(device, 1, rest);
        } else if (strcmp(line, "lost") == 0) {
            device->lost = 1;
        } else if (strcmp(line, "error") == 0) {
            char call[16] = "", code[40] = "";
            if (sscanf(rest, "%15s %39s", call, code) == 2) {
                for (int i = 0; i < CALLS; i++) {
                    if (strcmp(call, call_names[i]) == 0) {
                        device->error[i] = code_of(code);
                    }
                }
            }
        }
    }
}

/* Reads the state file again if it was replaced since it was last read. */
static void reload(void) {
    locate();
    struct stat now;
    if (stat(state_path, &now) != 0) {
        memset(&state, 0, sizeof state);
        memset(&loaded, 0, sizeof loaded);
        return;
    }
    if (now.st_ino == loaded.st_ino && now.st_size == loaded.st_size &&
        now.st_mtim.tv_sec == loaded.st_mtim.tv_sec && now.st_mtim.tv_nsec == loaded.st_mtim.tv_nsec) {
        return;
    }
    FILE *file = fopen(state_path, "r");
    if (file == NULL) {
        return;
    }
    parse(file);
    fclose(file);
    loaded = now;
}

static void pause_ms(long ms) {
    if (ms > 0) {
        struct timespec wait = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&wait, &wait) != 0) {
        }
    }
}

/* A real fault, as a broken driver makes: a raised signal would be ignored by the
 * handler that Rust programs install for SIGSEGV. */
static void crash(void) {
    volatile int *nowhere = NULL;
    *nowhere = 1;
    raise(SIGSEGV);
}

static void log_call(const char *function, int index) {
    if (!state.log) {
        return;
    }
    FILE *file = fopen(log_path, "a");
    if (file != NULL) {
        fprintf(file, "%s %d\n", function, index);
        fclose(file);
    }
}

/* The device behind a handle, after the state's errors for `call`; NULL with *result set
 * when the call fails. */
static struct fake_device *device_for(nvmlDevice_t handle, enum call call, const char *function,
                                      nvmlReturn_t *result) {
    reload();
    long index = handle == NULL ? -1 : handle - handles;
    log_call(function, (int)index);
    pause_ms(state.read_sleep_ms);
    if (state.crash_read) {
        crash();
    }
    if (index < 0 || index >= state.device_count) {
        *result = INVALID_ARGUMENT;
        return NULL;
    }
    struct fake_device *device = &state.devices[index];
    *result = device->lost ? GPU_IS_LOST : device->error[call];
    return *result == SUCCESS ? device : NULL;
}

static nvmlReturn_t copy_string(const char *text, char *out, unsigned int length) {
    if (out == NULL || strlen(text) + 1 > length) {
        return INSUFFICIENT_SIZE;
    }
    memcpy(out, text, strlen(text) + 1);
    return SUCCESS;
}

static nvmlReturn_t copy_processes(const nvmlProcessInfo_t *list, int count, unsigned int *info_count,
                                   nvmlProcessInfo_t *infos) {
    if (info_count == NULL) {
        return INVALID_ARGUMENT;
    }
    if (state.claim_processes > 0) {
        unsigned long long claimed = state.claim_processes > 0xFFFFFFFFull ? 0xFFFFFFFFu : state.claim_processes;
        if (*info_count < claimed || infos == NULL) {
            *info_count = (unsigned int)claimed;
            return INSUFFICIENT_SIZE;
        }
    }
    if (*info_count < (unsigned int)count || (count > 0 && infos == NULL)) {
        *info_count = (unsigned int)count;
        return INSUFFICIENT_SIZE;
    }
    memcpy(infos, list, sizeof *list * (size_t)count);
    *info_count = (unsigned int)count;
    return SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    reload();
    pause_ms(state.init_sleep_ms);
    if (state.crash_init) {
        crash();
    }
    return state.init_error;
}

nvmlReturn_t nvmlShutdown(void) {
    return SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    reload();
    return copy_string(state.driver, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    reload();
    if (state.count_error != SUCCESS) {
        return state.count_error;
    }
    *count = state.claim_devices > 0 ? (unsigned int)(state.claim_devices > 0xFFFFFFFFull ? 0xFFFFFFFFu : state.claim_devices)
                                     : (unsigned int)state.device_count;
    return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    nvmlReturn_t result;
    if (index >= MAX_DEVICES || device == NULL) {
        return INVALID_ARGUMENT;
    }
    if (device_for(&handles[index], CALL_HANDLE, "nvmlDeviceGetHandleByIndex_v2", &result) != NULL) {
        *device = &handles[index];
    }
    return result;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t handle, char *name, unsigned int length) {
    nvmlReturn_t result;
    struct fake_device *device = device_for(handle, CALL_NAME, "nvmlDeviceGetName", &result);
    return device == NULL ? result : copy_string(device->name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t handle, char *uuid, unsigned int length) {
    nvmlReturn_t result;
    struct fake_device *device = device_for(handle, CALL_UUID, "nvmlDeviceGetUUID", &result);
    return device == NULL ? result : copy_string(device->uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t handle, nvmlMemory_v2_t *memory) {
    nvmlReturn_t result;
    struct fake_device *device = device_for(handle, CALL_MEMORY, "nvmlDeviceGetMemoryInfo_v2", &result);
    if (device == NULL) {
        return result;
    }
    if (memory == NULL || memory->version != (unsigned int)(sizeof *memory | 2u << 24)) {
        return ARGUMENT_VERSION_MISMATCH;
    }
    memory->total = device->total;
    memory->reserved = 0;
    memory->used = device->used;
    memory->free = device->used == NOT_AVAILABLE || device->used > device->total ? 0 : device->total - device->used;
    return SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t handle, unsigned int *info_count,
                                                     nvmlProcessInfo_t *infos) {
    nvmlReturn_t result;
    struct fake_device *device =
        device_for(handle, CALL_COMPUTE, "nvmlDeviceGetComputeRunningProcesses_v3", &result);
    return device == NULL ? result : copy_processes(device->compute, device->compute_count, info_count, infos);
}

#ifndef FAKE_NVML_WITHOUT_GRAPHICS
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t handle, unsigned int *info_count,
                                                      nvmlProcessInfo_t *infos) {
    nvmlReturn_t result;
    struct fake_device *device =
        device_for(handle, CALL_GRAPHICS, "nvmlDeviceGetGraphicsRunningProcesses_v3", &result);
    return device == NULL ? result : copy_processes(device->graphics, device->graphics_count, info_count, infos);
}
#endif
