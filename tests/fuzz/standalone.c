/*
 * A main() for the fuzz harnesses where libFuzzer is not linked (GCC, or clang without
 * RGPU_FUZZ): runs LLVMFuzzerTestOneInput once on each file named, each from its own exact
 * malloc'd copy so that AddressSanitizer sees a read past its end, as under libFuzzer.
 * Prints how many ran; exit 1 when a file cannot be read (a harness that finds a bug aborts).
 */
#include <string.h>

#include "fuzz.h"

static int run_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!fp || fseek(fp, 0, SEEK_END) || (n = ftell(fp)) < 0 || fseek(fp, 0, SEEK_SET)) {
		fprintf(stderr, "cannot read %s\n", path);
		if (fp)
			fclose(fp);
		return 1;
	}
	buf = malloc(n ? (size_t)n : 1);
	if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
		fprintf(stderr, "cannot read %s\n", path);
		free(buf);
		fclose(fp);
		return 1;
	}
	fclose(fp);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	int i, ran = 0;

	for (i = 1; i < argc; i++) {
		if (argv[i][0] == '-')
			continue; /* libFuzzer's flags (-runs=0 ...) mean nothing here */
		if (run_file(argv[i]))
			return 1;
		ran++;
	}
	printf("%s: %d inputs ran\n", argv[0], ran);
	return 0;
}
