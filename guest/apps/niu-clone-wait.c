// SPDX-License-Identifier: MIT
/*
 * niu-clone-wait: wait until this guest runs as a clone, and print the
 * command line the clone was given.
 *
 * A template (scripts/niu-cluster --clone, docs/snapshots.md §6) boots
 * with arctic.template=1 and its /init runs this before anything that
 * depends on the node: it polls QEMU's firmware configuration device
 * (fw_cfg, I/O ports 0x510 and 0x511) every 10 ms of the guest's time
 * for a file named opt/arctic/cmdline.  The template's QEMU has none;
 * each clone's QEMU is started from the template's saved state with
 * `-fw_cfg name=opt/arctic/cmdline,file=...`, its node's command line.
 * fw_cfg's contents are not part of a saved state, so the clone finds its
 * own.  Polling, not the console, keeps a timed clone's run free of host
 * timing: the file is there when the clone's first poll looks.
 *
 * Before it polls, it writes the template NIU's NIU_TEMPLATE_PAUSE
 * (BAR 0, mapped through sysfs: no driver is loaded yet), which stops the
 * machine right there; the launcher saves it stopped.  So every template
 * of one image is saved at the same instant of its own time, and a timed
 * clone's figures do not depend on when the launcher saw the template's
 * console line.  Each clone goes on from that write.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arctic/niu-hw.h"

#define FW_CFG_PORT_SEL   0x510
#define FW_CFG_PORT_DATA  0x511
#define FW_CFG_SIGNATURE  0x0000
#define FW_CFG_FILE_DIR   0x0019
#define FW_CFG_NAME_LEN   56

#define CLONE_FILE "opt/arctic/cmdline"
#define POLL_NS (10 * 1000 * 1000)
#define MAX_CMDLINE 4096

static void fw_select(uint16_t key)
{
	outw(key, FW_CFG_PORT_SEL);
}

static void fw_read(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len--)
		*p++ = inb(FW_CFG_PORT_DATA);
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3];
}

/* The hexadecimal number in sysfs file @dir/@name, or -1. */
static long sysfs_hex(const char *dir, const char *name)
{
	char path[512];
	long value = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%li", &value) != 1)
			value = -1;
		fclose(f);
	}
	return value;
}

/*
 * Write NIU_TEMPLATE_PAUSE of the NIU (the first PCI device with its
 * IDs): the machine stops within the write and, in a clone, goes on
 * after it.  0 once written, -1 with a message if there is no NIU.
 */
static int pause_template(void)
{
	const char *base = "/sys/bus/pci/devices";
	char dir[512], res[600];
	struct dirent *d;
	DIR *devices;
	volatile uint32_t *regs;
	int fd = -1;

	errno = 0;
	devices = opendir(base);

	while (devices && (d = readdir(devices))) {
		snprintf(dir, sizeof(dir), "%s/%s", base, d->d_name);
		if (sysfs_hex(dir, "vendor") == ARCTIC_NIU_PCI_VENDOR_ID &&
		    sysfs_hex(dir, "device") == ARCTIC_NIU_PCI_DEVICE_ID) {
			snprintf(res, sizeof(res), "%s/resource%d", dir,
				 ARCTIC_BAR_CONTROL);
			fd = open(res, O_RDWR | O_SYNC);
			break;
		}
	}
	if (devices)
		closedir(devices);
	if (fd < 0) {
		fprintf(stderr, "niu-clone-wait: no arctic-niu BAR %d to pause "
			"the template at: %s\n", ARCTIC_BAR_CONTROL,
			strerror(errno ? errno : ENODEV));
		return -1;
	}
	regs = mmap(NULL, ARCTIC_BAR_CONTROL_SIZE, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	close(fd);
	if (regs == MAP_FAILED) {
		fprintf(stderr, "niu-clone-wait: mmap BAR %d: %s\n",
			ARCTIC_BAR_CONTROL, strerror(errno));
		return -1;
	}
	regs[A_NIU_TEMPLATE_PAUSE / 4] = 1;
	munmap((void *)regs, ARCTIC_BAR_CONTROL_SIZE);
	return 0;
}

/* The file's selector and size, if the directory has it. */
static int find_file(uint32_t count, uint16_t *select, uint32_t *size)
{
	uint8_t ent[4 + 2 + 2 + FW_CFG_NAME_LEN];
	uint32_t i;

	for (i = 0; i < count; i++) {
		fw_read(ent, sizeof(ent));
		ent[sizeof(ent) - 1] = 0;
		if (!strcmp((char *)ent + 8, CLONE_FILE)) {
			*size = be32(ent);
			*select = (uint16_t)(ent[4] << 8 | ent[5]);
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct timespec poll = { 0, POLL_NS };
	uint32_t count, last = UINT32_MAX, size = 0;
	uint16_t select = 0;
	uint8_t word[4];
	char *line;

	if (argc > 1) {
		printf("usage: %s\n"
		       "Stops the machine through the template NIU's\n"
		       "NIU_TEMPLATE_PAUSE, for it to be saved, then\n"
		       "waits until QEMU's fw_cfg has a file %s (a clone's\n"
		       "command line, given by scripts/niu-cluster --clone) and\n"
		       "prints it.  Used by the guest's /init with\n"
		       "arctic.template=1; docs/snapshots.md section 6.\n",
		       argv[0], CLONE_FILE);
		return strcmp(argv[1], "--help") ? 2 : 0;
	}
	if (ioperm(FW_CFG_PORT_SEL, 2, 1)) {
		fprintf(stderr, "niu-clone-wait: ioperm: %s\n", strerror(errno));
		return 1;
	}
	fw_select(FW_CFG_SIGNATURE);
	fw_read(word, sizeof(word));
	if (memcmp(word, "QEMU", 4)) {
		fprintf(stderr, "niu-clone-wait: no QEMU fw_cfg device\n");
		return 1;
	}
	if (pause_template())
		return 1;
	for (;;) {
		fw_select(FW_CFG_FILE_DIR);
		fw_read(word, sizeof(word));
		count = be32(word);
		if (count != last && find_file(count, &select, &size))
			break;
		last = count;
		nanosleep(&poll, NULL);
	}
	if (size == 0 || size > MAX_CMDLINE) {
		fprintf(stderr, "niu-clone-wait: %s has %u bytes (1..%d)\n",
			CLONE_FILE, size, MAX_CMDLINE);
		return 1;
	}
	line = calloc(1, size + 1);
	if (!line)
		return 1;
	fw_select(select);
	fw_read(line, size);
	line[strcspn(line, "\n")] = 0;
	printf("%s\n", line);
	return 0;
}
