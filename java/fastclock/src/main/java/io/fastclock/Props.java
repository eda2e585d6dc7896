package io.fastclock;

import java.util.Locale;

/** Boolean system properties, read once at start-up. */
final class Props {
    private Props() {}

    /**
     * true/false (also yes/no, on/off, 1/0); anything else keeps the default
     * and says so once on stderr, as the core does for its environment.
     */
    static boolean flag(String name, boolean dflt) {
        String v = System.getProperty(name);
        if (v == null || v.trim().isEmpty())
            return dflt;
        switch (v.trim().toLowerCase(Locale.ROOT)) {
        case "true": case "yes": case "on": case "1":
            return true;
        case "false": case "no": case "off": case "0":
            return false;
        default:
            System.err.println("fastclock: ignoring -D" + name + "=" + v + " (expected true or false); using " + dflt);
            return dflt;
        }
    }
}
