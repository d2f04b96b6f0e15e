/* torch/__init__.py requires a torch_shm_manager executable to exist. torchnative does
 * not share tensors between processes through it yet, so it refuses by name. */
#include <stdio.h>

int main(void) {
  fprintf(stderr,
          "torchnative: torch_shm_manager (shared-memory tensors for torch.multiprocessing) is not "
          "implemented\n");
  return 2;
}
