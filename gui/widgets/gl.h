// The OpenGL declarations the GUI uses (GL 3.3 core entry points exported by libOpenGL / glvnd).
#pragma once

#ifndef GL_GLEXT_PROTOTYPES
#define GL_GLEXT_PROTOTYPES 1
#endif
#include <GL/gl.h>
#include <GL/glext.h>
