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
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <time.h>

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
		       "Waits until QEMU's fw_cfg has a file %s (a clone's\n"
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
