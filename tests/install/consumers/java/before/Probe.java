/**
 * Loads manypy's natives from the Maven artifact on a machine that lacks what they link
 * (python3-torch's libtorch): it must be told so, with what to install, by a LibraryLoadException,
 * never a crash. Prints the message; exits 0 only if that is what happened.
 */
public final class Probe {
  public static void main(String[] args) {
    try {
      System.out.println(
          "loaded libmanypy " + org.manypy.Manypy.libraryVersion() + " without libtorch");
      System.exit(1);
    } catch (org.manypy.LibraryLoadException e) {
      System.out.println(e.getMessage());
      boolean clear =
          e.getMessage().contains("libtorch is not installed")
              && e.getMessage().contains("apt-get install python3-torch");
      System.exit(clear ? 0 : 1);
    }
  }
}
