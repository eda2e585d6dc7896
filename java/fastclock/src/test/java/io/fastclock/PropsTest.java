package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class PropsTest {
    static final String NAME = "fastclock.test.flag";

    static boolean with(String value, boolean dflt) {
        if (value == null)
            System.clearProperty(NAME);
        else
            System.setProperty(NAME, value);
        try {
            return Props.flag(NAME, dflt);
        } finally {
            System.clearProperty(NAME);
        }
    }

    @Test
    void spellingsOfTrueAndFalse() {
        for (String t : new String[] {"true", "TRUE", " yes ", "on", "1"})
            assertTrue(with(t, false), t);
        for (String f : new String[] {"false", "False", "no", "off", "0"})
            assertFalse(with(f, true), f);
    }

    @Test
    void unsetOrUnknownKeepsTheDefault() {
        assertTrue(with(null, true));
        assertFalse(with("", false));
        assertTrue(with("maybe", true));
        assertFalse(with("maybe", false));
    }
}
